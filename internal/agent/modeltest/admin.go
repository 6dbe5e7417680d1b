package modeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The admin API, served by every Server next to the model, for a harness
// that runs the server in another process or a pod:
//
//	GET  /healthz         200 "ok"
//	POST /admin/steps     appends a JSON array of Steps to the script; answers a Status
//	GET  /admin/steps     answers a Status
//	GET  /admin/requests  answers the recorded requests, a JSON array (see DecodeRequests)
//	POST /admin/reset     forgets every step and request; answers a Status
//
// Steps sent over HTTP cannot have Respond; EchoToolResults is the way to
// answer from the request.

// Status is the state of a server's script.
type Status struct {
	// Remaining is the number of steps not played yet.
	Remaining int `json:"remaining"`
	// Requests is the number of chat completion requests recorded.
	Requests int `json:"requests"`
}

// recorded is a request as GET /admin/requests writes it: the request's
// fields, its Authorization header and its body as sent.
type recorded struct {
	Request
	Authorization string          `json:"authorization,omitempty"`
	Raw           json.RawMessage `json:"raw,omitempty"`
}

func (s *Server) handleAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("POST /admin/steps", func(w http.ResponseWriter, r *http.Request) {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20))
		dec.DisallowUnknownFields()
		var steps []Step
		if err := dec.Decode(&steps); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("modeltest: failed to decode the steps, a JSON array: %v", err), "")
			return
		}
		s.Add(steps...)
		writeJSON(w, http.StatusOK, s.status())
	})
	mux.HandleFunc("GET /admin/steps", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.status())
	})
	mux.HandleFunc("GET /admin/requests", func(w http.ResponseWriter, _ *http.Request) {
		reqs := s.Requests()
		out := make([]recorded, 0, len(reqs))
		for _, r := range reqs {
			out = append(out, recorded{Request: r, Authorization: r.Authorization, Raw: r.Raw})
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /admin/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		writeJSON(w, http.StatusOK, s.status())
	})
}

// Reset forgets every step, played or not, and every recorded request.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps, s.next, s.requests = nil, 0, nil
}

func (s *Server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Remaining: len(s.steps) - s.next, Requests: len(s.requests)}
}

// DecodeRequests reads the body of GET /admin/requests.
func DecodeRequests(data []byte) ([]Request, error) {
	var recs []recorded
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("failed to decode the recorded requests: %w", err)
	}
	out := make([]Request, 0, len(recs))
	for _, r := range recs {
		req := r.Request
		req.Authorization, req.Raw = r.Authorization, r.Raw
		out = append(out, req)
	}
	return out, nil
}

// Admin scripts a server through its admin API.
type Admin struct {
	// URL is the server's base URL, without /v1: "http://10.0.0.7:8080", or
	// a proxy's URL ending in the server's root.
	URL string
	// Client sends the requests; http.DefaultClient when nil.
	Client *http.Client
}

// Healthy returns nil when the server answers GET /healthz.
func (a Admin) Healthy(ctx context.Context) error {
	_, err := a.do(ctx, http.MethodGet, "/healthz", nil)
	return err
}

// AddSteps appends steps to the server's script. Steps with Respond cannot
// be sent.
func (a Admin) AddSteps(ctx context.Context, steps ...Step) (Status, error) {
	for i, st := range steps {
		if st.Respond != nil {
			return Status{}, fmt.Errorf("step %d has Respond, which cannot be sent over HTTP", i)
		}
	}
	if steps == nil {
		steps = []Step{}
	}
	body, err := json.Marshal(steps)
	if err != nil {
		return Status{}, err
	}
	return a.status(ctx, http.MethodPost, "/admin/steps", body)
}

// Status returns the state of the server's script.
func (a Admin) Status(ctx context.Context) (Status, error) {
	return a.status(ctx, http.MethodGet, "/admin/steps", nil)
}

// Reset makes the server forget every step and request.
func (a Admin) Reset(ctx context.Context) error {
	_, err := a.status(ctx, http.MethodPost, "/admin/reset", nil)
	return err
}

// Requests returns the chat completion requests the server recorded, in
// order.
func (a Admin) Requests(ctx context.Context) ([]Request, error) {
	data, err := a.do(ctx, http.MethodGet, "/admin/requests", nil)
	if err != nil {
		return nil, err
	}
	return DecodeRequests(data)
}

func (a Admin) status(ctx context.Context, method, path string, body []byte) (Status, error) {
	var st Status
	data, err := a.do(ctx, method, path, body)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("failed to decode the answer of %s %s: %w", method, path, err)
	}
	return st, nil
}

func (a Admin) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if a.URL == "" {
		return nil, errors.New("modeltest: Admin has no URL")
	}
	url := strings.TrimSuffix(a.URL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := a.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to %s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("failed to read the answer of %s %s: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(data))
	}
	return data, nil
}
