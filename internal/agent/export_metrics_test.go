package agent

import (
	"context"
	"sync/atomic"
	"time"
)

// MetricsGate lets tests drive the clock of the runtime's /metrics gate and
// count the reviews it asks of the API server. Call it before the first
// scrape.
func (r *Runtime) MetricsGate(now func() time.Time) (reviews *atomic.Int64, kept func() int) {
	g := r.metricsGate
	reviews = &atomic.Int64{}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now = now
	ask := g.review
	g.review = func(ctx context.Context, token string) (bool, error) {
		reviews.Add(1)
		return ask(ctx, token)
	}
	return reviews, func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.verdicts)
	}
}

// Bounds of the answers the /metrics gate keeps.
const (
	MetricsVerdictTTL = metricsVerdictTTL
	MetricsVerdictMax = metricsVerdictMax
)
