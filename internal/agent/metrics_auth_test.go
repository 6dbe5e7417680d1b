package agent_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeskills/kubeskills/internal/agent"
)

// metricsReaderRole is the ClusterRole a Prometheus is bound to, installed
// from config/rbac as the chart installs it.
const metricsReaderRole = "kubeskills-metrics-reader"

// TestMetricsNeedAReaderToken: /metrics is served only to a token the API
// server authenticates and lets get /metrics, that of a ServiceAccount
// bound to kubeskills-metrics-reader. No token, or one the API server does
// not know (the API's own token among them), is answered 401, and a
// ServiceAccount without the grant 403. An answer that names an identity,
// allowed or denied, is kept for a minute: scrapes within it ask the API
// server nothing.
func TestMetricsNeedAReaderToken(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{})
	clock := newClock()
	reviews, _ := f.rt.MetricsGate(clock.Now)
	cs := adminClientset(t)
	reader := readerToken(t, cs, f.ns, "prometheus")
	stranger := serviceAccountToken(t, cs, f.ns, "stranger")
	awaitAllowed(t, stranger, false)

	scrape := func(token string, wantCode int, wantReviews int64, why string) string {
		t.Helper()
		code, body := f.do(t, http.MethodGet, "/metrics", token, nil)
		g.Expect(code).To(Equal(wantCode), why+": %s", body)
		g.Expect(reviews.Load()).To(Equal(wantReviews), why+": reviews asked of the API server")
		if wantCode != http.StatusOK {
			g.Expect(string(body)).NotTo(ContainSubstring(agent.MetricCatalogSkills), why+": metrics served")
		}
		return string(body)
	}
	body := scrape("", http.StatusUnauthorized, 0, "no token")
	g.Expect(body).To(ContainSubstring("bearer token"))
	scrape("not-a-token", http.StatusUnauthorized, 1, "a token the API server does not know")
	scrape("not-a-token", http.StatusUnauthorized, 2, "an unknown token again: such answers are not kept")
	scrape(f.token, http.StatusUnauthorized, 3, "the API's own token, which is no Kubernetes token")

	body = scrape(reader, http.StatusOK, 4, "a metrics reader")
	g.Expect(body).To(ContainSubstring(agent.MetricCatalogSkills))
	g.Expect(body).NotTo(ContainSubstring(reader))
	scrape(reader, http.StatusOK, 4, "a metrics reader again, within the minute")
	clock.Add(agent.MetricsVerdictTTL - time.Second)
	scrape(reader, http.StatusOK, 4, "a metrics reader at the end of the minute")

	scrape(stranger, http.StatusForbidden, 5, "a ServiceAccount without the grant")
	scrape(stranger, http.StatusForbidden, 5, "a ServiceAccount without the grant again: denials are kept too")

	clock.Add(time.Second)
	scrape(reader, http.StatusOK, 6, "a metrics reader after the minute: asked again")
	scrape(stranger, http.StatusForbidden, 6, "the denial, given later, is still kept")
}

// TestMetricsAnswersAreBounded: at most MetricsVerdictMax answers are
// kept; past that the oldest is dropped, and its token is asked about
// again.
func TestMetricsAnswersAreBounded(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{})
	clock := newClock()
	reviews, kept := f.rt.MetricsGate(clock.Now)
	cs := adminClientset(t)
	reader := readerToken(t, cs, f.ns, "prometheus")

	code, _ := f.do(t, http.MethodGet, "/metrics", reader, nil)
	g.Expect(code).To(Equal(http.StatusOK))
	var last string
	for i := range agent.MetricsVerdictMax {
		// Each token of the ServiceAccount is a token of its own.
		last = serviceAccountToken(t, cs, f.ns, "many")
		if i == 0 {
			awaitAllowed(t, last, false)
		}
		clock.Add(100 * time.Millisecond)
		code, _ := f.do(t, http.MethodGet, "/metrics", last, nil)
		g.Expect(code).To(Equal(http.StatusForbidden))
	}
	g.Expect(kept()).To(Equal(agent.MetricsVerdictMax))
	g.Expect(reviews.Load()).To(Equal(int64(agent.MetricsVerdictMax + 1)))

	code, _ = f.do(t, http.MethodGet, "/metrics", last, nil)
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Expect(reviews.Load()).To(Equal(int64(agent.MetricsVerdictMax+1)), "the newest answer is kept")
	code, _ = f.do(t, http.MethodGet, "/metrics", reader, nil)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(reviews.Load()).To(Equal(int64(agent.MetricsVerdictMax+2)), "the oldest answer was dropped")
	g.Expect(kept()).To(Equal(agent.MetricsVerdictMax))
}

// TestMetricsUnavailableWithoutTheAPIServer: when the API server cannot be
// asked, /metrics answers 503 and serves nothing, and the failure is not
// kept.
func TestMetricsUnavailableWithoutTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	closed := lis.Addr().String()
	g.Expect(lis.Close()).To(Succeed())
	f := newFixture(t, options{config: func(c *agent.Config) {
		c.KubeConfig = &rest.Config{Host: "https://" + closed, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	}})
	reviews, _ := f.rt.MetricsGate(time.Now)
	for i := range 2 {
		code, body := f.do(t, http.MethodGet, "/metrics", "some-token", nil)
		g.Expect(code).To(Equal(http.StatusServiceUnavailable), "%s", body)
		g.Expect(string(body)).NotTo(ContainSubstring(agent.MetricCatalogSkills))
		g.Expect(reviews.Load()).To(Equal(int64(i + 1)))
	}
}

// TestMetricsWithoutAuth: with auth disabled the whole API, /metrics
// included, is served without a token; with auth on, a runtime needs a
// Kubernetes config to tell who may read its metrics.
func TestMetricsWithoutAuth(t *testing.T) {
	g := NewWithT(t)
	open := newFixture(t, options{config: func(c *agent.Config) {
		c.TokenFile, c.DisableAuth, c.KubeConfig = "", true, nil
	}})
	code, body := open.do(t, http.MethodGet, "/metrics", "", nil)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(string(body)).To(ContainSubstring(agent.MetricCatalogSkills))

	_, err := agent.New(agent.Config{Agent: "ops", Namespace: "team", Identity: "admin", TokenFile: "token"}, nil, nil, logr.Discard())
	g.Expect(err).To(MatchError(ContainSubstring("Kubernetes config")))
}

// metricsToken returns the token of a ServiceAccount bound to
// kubeskills-metrics-reader, made once for the package's tests that read
// the metrics.
func metricsToken(t *testing.T) string {
	t.Helper()
	metricsReader.once.Do(func() {
		cs := adminClientset(t)
		metricsReader.token = readerToken(t, cs, env.Namespace(t), "prometheus")
	})
	if metricsReader.token == "" {
		t.Fatal("no metrics reader token")
	}
	return metricsReader.token
}

var metricsReader struct {
	once  sync.Once
	token string
}

// readerToken returns the token of ServiceAccount ns/name, bound to
// kubeskills-metrics-reader, once the API server lets it get /metrics.
func readerToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	role, err := cs.RbacV1().ClusterRoles().Get(ctx, metricsReaderRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	NewWithT(t).Expect(role.Rules).To(Equal(want), "the rules of %s", metricsReaderRole)
	token := serviceAccountToken(t, cs, ns, name)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-" + ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitAllowed(t, token, true)
	return token
}

// serviceAccountToken makes ServiceAccount ns/name, if it is not there,
// and returns a new token of it from the TokenRequest API.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// awaitAllowed waits until the API server authenticates token and answers,
// for its identity, allowed to get /metrics: a new ServiceAccount and a new
// binding reach the API server's caches a moment after they are stored.
func awaitAllowed(t *testing.T, token string, allowed bool) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() (bool, error) {
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	}, timeout, interval).Should(Equal(allowed))
}

func adminClientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
