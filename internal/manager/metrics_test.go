package manager_test

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() { env = e; return nil }))
}

// TestMetricsNeedAnAuthorizedToken runs the manager with the options
// cmd/manager has by default, under config/rbac, and scrapes its metrics:
// without a token, or with the token of a ServiceAccount not bound to
// kubeskills-metrics-reader, the endpoint refuses; bound, it serves them,
// over HTTPS.
func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var o manager.Options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse(nil)).To(Succeed())
	o.MetricsAddr, o.ProbeAddr = freeAddr(t), "0"
	op, err := operatortest.Start(env, o)
	g.Expect(err).NotTo(HaveOccurred())
	defer op.Stop()

	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.Namespace(t)
	reader := serviceAccountToken(t, cs, ns, "prometheus")
	stranger := serviceAccountToken(t, cs, ns, "stranger")
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeskills-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	url := "https://" + o.MetricsAddr + "/metrics"
	g.Eventually(func() (int, error) { return scrape(url, reader) }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(http.StatusOK), "a token bound to kubeskills-metrics-reader is not served")
	g.Expect(scrape(url, "")).To(Equal(http.StatusUnauthorized), "served without a token")
	g.Expect(scrape(url, "not-a-token")).To(Equal(http.StatusUnauthorized), "served to an unknown token")
	g.Expect(scrape(url, stranger)).To(Equal(http.StatusForbidden), "served to a token without the grant")
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + o.MetricsAddr + "/metrics"); err == nil {
		resp.Body.Close()
		g.Expect(resp.StatusCode).NotTo(Equal(http.StatusOK), "metrics are served over plain HTTP")
	}
}

// scrape GETs url with the bearer token (none if empty) and returns the
// status. The manager's certificate is self-signed.
func scrape(url, token string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test manager's certificate is self-signed
	}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// serviceAccountToken creates the ServiceAccount ns/name and returns a
// token of it.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("failed to create ServiceAccount %s/%s: %v", ns, name, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("failed to create a token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}
