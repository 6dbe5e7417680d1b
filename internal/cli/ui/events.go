package ui

import (
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// settle is how long the stream waits after a change for more before it
// tells the page, so that a burst of changes reloads the page once.
const settle = 100 * time.Millisecond

// events tells the page, as server-sent events, each time the runs it
// shows change, from a watch of the person's own: the page then reloads
// its live parts (static/ui.js). The stream ends when the watch does; the
// browser opens a new one.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	ctx := r.Context()
	// Watch from now: what the page shows was read before.
	var list skillsv1.CommandRunList
	if err := s.c.List(ctx, &list, client.InNamespace(s.ns), client.Limit(1)); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	wi, err := s.c.Watch(ctx, &skillsv1.CommandRunList{}, client.InNamespace(s.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer wi.Stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": watching\n\n")
	flusher.Flush()
	var pending <-chan time.Time
	for {
		select {
		case _, open := <-wi.ResultChan():
			if !open {
				return
			}
			if pending == nil {
				pending = time.After(settle)
			}
		case <-pending:
			pending = nil
			if _, err := fmt.Fprint(w, "event: change\ndata: runs\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-ctx.Done():
			return
		case <-s.stop.Done():
			return
		}
	}
}
