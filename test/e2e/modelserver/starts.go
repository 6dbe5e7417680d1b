package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// starts counts the starts of the chaos tests' commands: each command asks
// GET /starts/KEY first, so a command that ran twice counts 2. GET /starts
// answers every count as a JSON object; POST /starts/reset forgets them.
type starts struct {
	mu     sync.Mutex
	counts map[string]int
}

func (s *starts) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /starts/{key}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[r.PathValue("key")]++
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /starts", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		data, err := json.Marshal(s.counts)
		s.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	mux.HandleFunc("POST /starts/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		s.counts = map[string]int{}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// serveStarts serves the counter on addr until ctx ends.
func serveStarts(ctx context.Context, addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: (&starts{counts: map[string]int{}}).handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("failed to serve the start counter: %w", err)
	}
	return nil
}
