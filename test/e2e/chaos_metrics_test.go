//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
)

// managerLevel is a manager's goroutines and resident memory, read from
// its metrics endpoint as Prometheus would.
type managerLevel struct {
	Pod        string  `json:"pod"`
	Goroutines int     `json:"goroutines"`
	RSSMiB     float64 `json:"rssMiB"`
}

// The level a manager comes back to after a fault: its goroutines within a
// few of before (a watch or a worker may be mid-restart), its memory within
// half again of before (the cache now holds the round's runs).
const (
	goroutineSlack = 15
	rssGrowth      = 1.5
)

var (
	metricsTokenOnce sync.Once
	metricsToken     string
)

// leaderLevel reads the leading manager's level.
func leaderLevel(t *testing.T) managerLevel {
	t.Helper()
	var level managerLevel
	NewWithT(t).Eventually(func() error {
		pod, err := leader()
		if err != nil {
			return err
		}
		level, err = readLevel(t, pod)
		return err
	}, 2*time.Minute, time.Second).Should(Succeed())
	return level
}

// settledLevel waits until the leading manager is back to before's level
// and returns it; a level that never comes back fails the test.
func settledLevel(t *testing.T, before managerLevel) managerLevel {
	t.Helper()
	var level managerLevel
	NewWithT(t).Eventually(func(g Gomega) {
		level = leaderLevel(t)
		g.Expect(level.Goroutines).To(BeNumerically("<=", before.Goroutines+goroutineSlack), "goroutines")
		g.Expect(level.RSSMiB).To(BeNumerically("<=", before.RSSMiB*rssGrowth), "resident memory (MiB)")
	}, 2*time.Minute, 2*time.Second).Should(Succeed(), "the manager did not come back to its level before the fault: %+v", before)
	return level
}

// readLevel reads a manager pod's level from its metrics.
func readLevel(t *testing.T, pod string) (managerLevel, error) {
	t.Helper()
	families, err := scrapeManager(t, pod)
	if err != nil {
		return managerLevel{}, err
	}
	gauge := func(name string) (float64, error) {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			return 0, fmt.Errorf("the manager %s serves no %s", pod, name)
		}
		return f.GetMetric()[0].GetGauge().GetValue(), nil
	}
	goroutines, err := gauge("go_goroutines")
	if err != nil {
		return managerLevel{}, err
	}
	rss, err := gauge("process_resident_memory_bytes")
	if err != nil {
		return managerLevel{}, err
	}
	return managerLevel{Pod: pod, Goroutines: int(goroutines), RSSMiB: rss / (1 << 20)}, nil
}

// scrapeManager scrapes the manager pod's metrics through a port-forward,
// with the token of a ServiceAccount bound to kubeskills-metrics-reader,
// as Prometheus would.
func scrapeManager(t *testing.T, pod string) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	url, fwd := c.forward(t, operatorNS, "pod/"+pod, 8443)
	defer func() { _ = fwd.Process.Kill(); _ = fwd.Wait() }()
	// The manager's serving certificate is self-signed. No connection is
	// kept: an idle one would count among the manager's goroutines.
	insecure := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true,
	}}
	return scrapeOK(insecure, strings.Replace(url, "http://", "https://", 1)+"/metrics", metricsReaderToken(t), "pod "+pod)
}

// metricsReaderToken is the token of chaos-metrics, a ServiceAccount bound
// to kubeskills-metrics-reader (testdata/chaos-metrics.yaml), as a
// Prometheus's would be.
func metricsReaderToken(t *testing.T) string {
	t.Helper()
	metricsTokenOnce.Do(func() {
		c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/chaos-metrics.yaml")
		out, err := c.command(c.kubectl, "create", "token", "chaos-metrics", "-n", operatorNS, "--duration", "2h")
		if err != nil {
			t.Fatal(err)
		}
		metricsToken = strings.TrimSpace(out)
	})
	return metricsToken
}

// scrapeOK scrapes url with token and parses the metrics; an answer other
// than 200 is an error. what names the target in errors.
func scrapeOK(hc *http.Client, url, token, what string) (map[string]*dto.MetricFamily, error) {
	status, families, err := scrape(hc, url, token)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics of %s: %w", what, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics of %s: %d %s", what, status, http.StatusText(status))
	}
	return families, nil
}

// scrape GETs url with a bearer token (none when empty) and returns the
// status and, when it is 200, the metrics parsed.
func scrape(hc *http.Client, url, token string) (int, map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil, nil
	}
	parser := expfmt.NewTextParser(promodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("failed to parse the metrics: %w", err)
	}
	return resp.StatusCode, families, nil
}
