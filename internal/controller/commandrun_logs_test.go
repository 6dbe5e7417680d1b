package controller_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeskills/kubeskills/internal/controller"
)

// TestPodLogsReadsOnlyTheEnd: a sandbox's log is read for the result line
// the runner writes last, so only its last lines, and at most a few MiB,
// are asked for: a log grown large costs the operator nothing.
func TestPodLogsReadsOnlyTheEnd(t *testing.T) {
	g := NewWithT(t)
	var asked url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.Query()
		_, _ = w.Write([]byte("log\n"))
	}))
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	g.Expect(err).NotTo(HaveOccurred())

	out, err := controller.PodLogs(cs)(context.Background(), "ns", "pod", "command")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal("log\n"))
	g.Expect(asked.Get("container")).To(Equal("command"))
	g.Expect(asked.Get("tailLines")).To(Equal("16"))
	g.Expect(asked.Get("limitBytes")).To(Equal("4194304"))
}
