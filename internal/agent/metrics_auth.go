package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
)

// How the answers about who may read /metrics are kept and asked for.
const (
	// metricsPath is the non-resource URL a scraper must be allowed to get,
	// the one the ClusterRole kubeskills-metrics-reader grants.
	metricsPath = "/metrics"
	// metricsVerdictTTL is how long an answer is kept: a scrape every 15
	// seconds costs one review a minute, and a grant taken away stops
	// working within that time.
	metricsVerdictTTL = time.Minute
	// metricsVerdictMax bounds the answers kept; the oldest goes first.
	metricsVerdictMax = 64
	// metricsReviewTimeout bounds one review.
	metricsReviewTimeout = 10 * time.Second
	// metricsReviewQPS and metricsReviewBurst bound the reviews asked of
	// the API server, whatever callers send.
	metricsReviewQPS   = 5
	metricsReviewBurst = 10
)

// metricsGate admits a scrape of /metrics whose bearer token belongs to an
// identity the API server lets get /metrics, as the manager's metrics
// require. It asks the API server as the caller: a SelfSubjectAccessReview
// made with the caller's token in place of the runtime's own credentials,
// which every authenticated user may create (system:basic-user). So the API
// server both authenticates the token and answers for its identity, and
// the runtime's ServiceAccount needs no right to review tokens or access.
//
// No token, or one the API server does not authenticate, is answered 401;
// a token without the grant 403; a review that fails 503, and the metrics
// are never served then. Answers that name an identity (allowed or denied)
// are kept for metricsVerdictTTL, by the SHA-256 of the token: the token
// itself is never kept.
type metricsGate struct {
	// base reaches the API server with its CA and no credentials.
	base *rest.Config

	mu sync.Mutex
	// now is the clock of the answers kept.
	now func() time.Time
	// review asks the API server whether the token may get /metrics.
	review   func(ctx context.Context, token string) (bool, error)
	verdicts map[[sha256.Size]byte]metricsVerdict
}

// metricsVerdict is an answer kept, and when it was given.
type metricsVerdict struct {
	allowed bool
	at      time.Time
}

func newMetricsGate(cfg *rest.Config) *metricsGate {
	base := rest.AnonymousClientConfig(cfg)
	// One limiter for the clients of every token.
	base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(metricsReviewQPS, metricsReviewBurst)
	g := &metricsGate{base: base, now: time.Now, verdicts: map[[sha256.Size]byte]metricsVerdict{}}
	g.review = g.ask
	return g
}

// ask creates a SelfSubjectAccessReview of get /metrics as the token's
// identity.
func (g *metricsGate) ask(ctx context.Context, token string) (bool, error) {
	cfg := rest.CopyConfig(g.base)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("failed to create a client for the caller's token: %w", err)
	}
	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: metricsPath, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// allowed tells whether the token may get /metrics, from an answer kept or
// from the API server. An error the API server answered Unauthorized means
// the token is not authenticated.
func (g *metricsGate) allowed(ctx context.Context, token string) (bool, error) {
	key := sha256.Sum256([]byte(token))
	g.mu.Lock()
	v, ok := g.verdicts[key]
	fresh := ok && g.now().Sub(v.at) < metricsVerdictTTL
	review := g.review
	g.mu.Unlock()
	if fresh {
		return v.allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, metricsReviewTimeout)
	defer cancel()
	allowed, err := review(ctx, token)
	if apierrors.IsForbidden(err) {
		// Authenticated, but not even allowed to ask: denied.
		allowed, err = false, nil
	}
	if err != nil {
		return false, err
	}
	g.keep(key, allowed)
	return allowed, nil
}

// keep remembers an answer, dropping the expired ones and, when full, the
// oldest.
func (g *metricsGate) keep(key [sha256.Size]byte, allowed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	var oldest [sha256.Size]byte
	var oldestAt time.Time
	for k, v := range g.verdicts {
		if now.Sub(v.at) >= metricsVerdictTTL {
			delete(g.verdicts, k)
		} else if oldestAt.IsZero() || v.at.Before(oldestAt) {
			oldest, oldestAt = k, v.at
		}
	}
	if _, ok := g.verdicts[key]; !ok && len(g.verdicts) >= metricsVerdictMax {
		delete(g.verdicts, oldest)
	}
	g.verdicts[key] = metricsVerdict{allowed: allowed, at: now}
}

// wrap serves next to the callers the gate admits.
func (g *metricsGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			metricsUnauthorized(w)
			return
		}
		allowed, err := g.allowed(req.Context(), token)
		switch {
		case apierrors.IsUnauthorized(err):
			metricsUnauthorized(w)
		case err != nil:
			ctrl.LoggerFrom(req.Context()).Error(err, "Failed to ask the API server whether the caller may read the metrics")
			writeText(w, http.StatusServiceUnavailable, "cannot check the token with the API server now")
		case !allowed:
			writeText(w, http.StatusForbidden, "the token may not get /metrics")
		default:
			next.ServeHTTP(w, req)
		}
	})
}

func metricsUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kubeskills-agent"`)
	writeText(w, http.StatusUnauthorized, "a bearer token that may get /metrics is required")
}

// metricsHandler serves the metrics behind the gate. With auth on, the
// runtime always has a Kubernetes config: cmd/agent needs one to file
// CommandRuns (in a pod, and under `make run-local` its kubeconfig), and
// New refuses to start without one, so /metrics is never served unchecked
// for want of a config. Only the existing switch that serves the whole API
// without a token (--disable-auth, the Agent's spec.access.disableAuth)
// serves the metrics to anyone, as it serves every other route.
func (r *Runtime) metricsHandler() http.Handler {
	if r.metricsGate == nil {
		return r.metrics.handler()
	}
	return r.metricsGate.wrap(r.metrics.handler())
}
