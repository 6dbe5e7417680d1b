package manager

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// authorizeMetrics is the metrics server's filter: a caller must present a
// bearer token the API server authenticates (a TokenReview) and be allowed
// to get the request's path (a SubjectAccessReview), as kube-apiserver
// itself decides for a non-resource URL. It answers 401 to a missing or
// unknown token and 403 to a caller without the grant.
//
// controller-runtime's filters package does the same but links the API
// server's libraries into the manager; two reviews need only client-go.
func authorizeMetrics(cfg *rest.Config, _ *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the metrics authorizer's clientset: %w", err)
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			status, reason := metricsAccess(r, cs)
			if status != http.StatusOK {
				log.V(1).Info("refused a metrics request", "status", status, "reason", reason)
				http.Error(w, http.StatusText(status), status)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// metricsAccess returns http.StatusOK when the request's token belongs to
// a user allowed to get its path, else the status to answer and why.
func metricsAccess(r *http.Request, cs kubernetes.Interface) (int, string) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return http.StatusUnauthorized, "no bearer token"
	}
	tr, err := cs.AuthenticationV1().TokenReviews().Create(r.Context(), &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: strings.TrimSpace(token)},
	}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError, fmt.Sprintf("failed to review token: %v", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, "token not authenticated: " + tr.Status.Error
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: r.URL.Path, Verb: strings.ToLower(r.Method)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError, fmt.Sprintf("failed to review access of %s: %v", u.Username, err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, fmt.Sprintf("%s may not get %s: %s", u.Username, r.URL.Path, sar.Status.Reason)
	}
	return http.StatusOK, ""
}
