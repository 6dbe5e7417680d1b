package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/netutil"
	ctrl "sigs.k8s.io/controller-runtime"
)

// ServerLimits bound what callers of the API can hold: connections, time
// and requests in flight. Unset (zero) fields take the defaults below.
type ServerLimits struct {
	// ReadHeaderTimeout bounds the arrival of a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the arrival of a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of an answer; a chat or a command
	// gets ChatTimeout or the command wait on top of it.
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no request.
	IdleTimeout time.Duration
	// ChatTimeout bounds one chat request, its whole tool loop included.
	ChatTimeout time.Duration
	// MaxConcurrentRequests bounds the /v1/ requests served at once;
	// the next one is answered 429.
	MaxConcurrentRequests int
	// MaxConnections bounds the connections served at once; the next one
	// waits to be accepted.
	MaxConnections int
	// MCPMaxSessions bounds the MCP sessions open at once; a new one past
	// that is answered 503.
	MCPMaxSessions int
	// MCPMaxSessionRequests bounds the requests one MCP session has in
	// flight (calls, and streams opened by POST); the next one is answered
	// 429. Its one GET stream is not counted: the SDK refuses a second.
	MCPMaxSessionRequests int
	// MCPSessionIdle closes an MCP session that sends no request for that
	// long.
	MCPSessionIdle time.Duration
}

// Defaults of ServerLimits.
const (
	DefaultReadHeaderTimeout     = 10 * time.Second
	DefaultReadTimeout           = 30 * time.Second
	DefaultWriteTimeout          = time.Minute
	DefaultIdleTimeout           = 2 * time.Minute
	DefaultChatTimeout           = 30 * time.Minute
	DefaultMaxConcurrentRequests = 32
	DefaultMaxConnections        = 256
	DefaultMCPMaxSessions        = 32
	DefaultMCPMaxSessionRequests = 8
	DefaultMCPSessionIdle        = 10 * time.Minute
)

// withDefaults fills in the unset limits.
func (l ServerLimits) withDefaults() ServerLimits {
	orDuration := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	orDuration(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	orDuration(&l.ReadTimeout, DefaultReadTimeout)
	orDuration(&l.WriteTimeout, DefaultWriteTimeout)
	orDuration(&l.IdleTimeout, DefaultIdleTimeout)
	orDuration(&l.ChatTimeout, DefaultChatTimeout)
	orDuration(&l.MCPSessionIdle, DefaultMCPSessionIdle)
	if l.MCPMaxSessions <= 0 {
		l.MCPMaxSessions = DefaultMCPMaxSessions
	}
	if l.MCPMaxSessionRequests <= 0 {
		l.MCPMaxSessionRequests = DefaultMCPMaxSessionRequests
	}
	if l.MaxConcurrentRequests <= 0 {
		l.MaxConcurrentRequests = DefaultMaxConcurrentRequests
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	return l
}

// bindFlags registers the limits as command-line flags.
func (l *ServerLimits) bindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", DefaultReadHeaderTimeout, "How long a request's headers may take to arrive.")
	fs.DurationVar(&l.ReadTimeout, "read-timeout", DefaultReadTimeout, "How long a whole request, body included, may take to arrive.")
	fs.DurationVar(&l.WriteTimeout, "write-timeout", DefaultWriteTimeout, "How long an answer may take to write; chats and commands get their own time on top.")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "How long a kept-alive connection may stay idle.")
	fs.DurationVar(&l.ChatTimeout, "chat-timeout", DefaultChatTimeout, "How long one chat request may run, its tool loop included.")
	fs.IntVar(&l.MaxConcurrentRequests, "max-concurrent-requests", DefaultMaxConcurrentRequests, "Most API requests served at once; more are answered 429.")
	fs.IntVar(&l.MaxConnections, "max-connections", DefaultMaxConnections, "Most connections served at once; more wait to be accepted.")
	fs.IntVar(&l.MCPMaxSessions, "mcp-max-sessions", DefaultMCPMaxSessions, "Most MCP sessions open at once; a new one past that is answered 503.")
	fs.IntVar(&l.MCPMaxSessionRequests, "mcp-max-session-requests", DefaultMCPMaxSessionRequests,
		"Most requests one MCP session may have in flight; more are answered 429.")
	fs.DurationVar(&l.MCPSessionIdle, "mcp-session-idle-timeout", DefaultMCPSessionIdle, "How long an MCP session may send no request before it is closed.")
}

// headerRequestID carries the id of each request on its answer; the log
// lines of the request carry it too, so an error a caller reports can be
// found in the log.
const headerRequestID = "X-Request-Id"

// headerShouldRetry tells the official OpenAI clients whether to retry a
// failed request; they retry 408, 409, 429 and 5xx twice by default.
const headerShouldRetry = "X-Should-Retry"

// Server returns the HTTP server of the runtime's API, with its timeouts:
// the headers must arrive within ReadHeaderTimeout and the whole request
// within ReadTimeout; an answer must be written within WriteTimeout, which
// chats and commands extend by how long they may take; an idle connection
// is closed after IdleTimeout.
func (r *Runtime) Server() *http.Server {
	return &http.Server{
		Handler:           r.Handler(),
		ReadHeaderTimeout: r.cfg.Server.ReadHeaderTimeout,
		ReadTimeout:       r.cfg.Server.ReadTimeout,
		WriteTimeout:      r.cfg.Server.WriteTimeout,
		IdleTimeout:       r.cfg.Server.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// Listener bounds the connections served at once to MaxConnections: a
// further connection waits to be accepted until one closes.
func (r *Runtime) Listener(l net.Listener) net.Listener {
	return netutil.LimitListener(l, r.cfg.Server.MaxConnections)
}

// Serve serves the API on lis until ctx ends, then lets requests in flight
// finish for at most grace.
func (r *Runtime) Serve(ctx context.Context, lis net.Listener, grace time.Duration) error {
	srv := r.Server()
	go r.FollowCatalog(ctx, time.Second)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(r.Listener(lis)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("failed to serve on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("failed to shut down the HTTP server: %w", err)
	}
	return nil
}

// newRequestID returns an id for a request.
func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "req_" + hex.EncodeToString(b)
}

// requestIDKey keys the request id in a request's context.
type requestIDKey struct{}

// requestID returns the id instrument gave the request.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// limit answers 429 when every slot is taken, that is when
// MaxConcurrentRequests requests are already being served by the routes
// sharing slots: a chat holds its slot for as long as its tool loop runs, so
// the bound keeps authenticated callers from piling up model calls and
// CommandRun watches. Nothing has happened when 429 is answered, so the
// caller may retry.
func limit(slots chan struct{}, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "1")
			w.Header().Set(headerShouldRetry, "true")
			writeJSON(w, http.StatusTooManyRequests, map[string]apiError{"error": {
				Message: fmt.Sprintf("the agent is serving %d requests, its limit; retry shortly", cap(slots)),
				Type:    "rate_limit_error", Code: "rate_limit_exceeded",
			}})
			return
		}
		defer func() { <-slots }()
		next.ServeHTTP(w, req)
	})
}

// readBody reads the whole body, of at most limit bytes, within the
// server's ReadTimeout, then lifts the read deadline: a handler that runs
// for minutes (a chat's tool loop) must not be cut off by a timeout meant
// for reading its request. A body too large is 413; one that does not
// arrive in time is 408.
func readBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		data, err := io.ReadAll(http.MaxBytesReader(w, req.Body, limit))
		if err != nil {
			var tooLarge *http.MaxBytesError
			var netErr net.Error
			switch {
			case errors.As(err, &tooLarge):
				writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error",
					"the body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
			case errors.As(err, &netErr) && netErr.Timeout():
				w.Header().Set("Connection", "close")
				writeError(w, http.StatusRequestTimeout, "invalid_request_error", "the body did not arrive in time")
			default:
				writeError(w, http.StatusBadRequest, "invalid_request_error", "the body could not be read")
			}
			return
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		req.Body = io.NopCloser(bytes.NewReader(data))
		next.ServeHTTP(w, req)
	})
}

// extendWrite lets a handler that may run for d write its answer: the
// server's WriteTimeout counts from the request, so it is moved to d plus
// WriteTimeout from now.
func (r *Runtime) extendWrite(w http.ResponseWriter, d time.Duration) {
	if r.cfg.Server.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + r.cfg.Server.WriteTimeout))
	}
}

// fail answers a failure the caller cannot act on: err, which may hold
// Kubernetes or model errors, is logged with the request id, and the
// caller gets a short message and that id. Such failures are not retried
// (x-should-retry: false): a chat that failed may already have called tools.
func fail(w http.ResponseWriter, req *http.Request, status int, typ, msg string, err error) {
	id := requestID(req.Context())
	ctrl.LoggerFrom(req.Context()).Error(err, msg)
	w.Header().Set(headerShouldRetry, "false")
	writeError(w, status, typ, fmt.Sprintf("%s (request id %s)", msg, id))
}
