package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// A warm sandbox is a pod started before any command exists. Its runner
// (Serve) waits for exactly one command, which the operator hands over
// with HandOff, runs it as Run does, answers with the result on the same
// connection, writes the result as "runner run" does and ends.

// HandoffPort is the TCP port a warm sandbox's runner listens on for its
// command.
const HandoffPort = 8070

// HandoffPath is the path the operator POSTs a Handoff to.
const HandoffPath = "/v1/handoff"

// MaxHandoffBytes bounds a Handoff request body: a policy can be large.
const MaxHandoffBytes = 16 << 20

// Timing of Serve: how long a request may take to send its headers, and
// how long Serve waits, once the command ended, for its result to be
// written to every request that waits for it.
const (
	handoffHeaderTimeout = 10 * time.Second
	handoffDrainWait     = 5 * time.Second
)

// maxRefusalBytes bounds the reason HandOff reads from a refusal.
const maxRefusalBytes = 4 << 10

// maxHandoffLineBytes bounds one line of the runner's answer that HandOff
// reads: a result is at most MaxResultBytes, as in the container log.
const maxHandoffLineBytes = MaxResultBytes + 1024

// States in the lines of the runner's answer to an accepted handoff.
const (
	handoffAccepted = "accepted"
	handoffDone     = "done"
)

// ErrNotHandedOver is wrapped by the errors of HandOff when the runner
// refused the handoff or the request never reached it: the command did not
// start in that pod, and may safely run elsewhere.
var ErrNotHandedOver = errors.New("the command was not handed over to the warm sandbox")

// Handoff is the one command the operator hands a warm sandbox.
type Handoff struct {
	// RunUID is the CommandRun's UID. A pod takes one run only; the same
	// RunUID posted again attaches to that run instead of starting it
	// again.
	RunUID string `json:"runUID"`
	// Command is the shell command line.
	Command string `json:"command"`
	// Policy is the encoded PolicySnapshot that judged the run, as
	// "runner run --policy" gets it.
	Policy string `json:"policy"`
	// TimeoutMillis stops the command after this many milliseconds. It
	// must be positive and at most the pod's maximum (ServeOptions.MaxTimeout).
	TimeoutMillis int64 `json:"timeoutMillis"`
	// OutputLimit is the number of bytes kept of each of stdout and stderr.
	// It must be positive.
	OutputLimit int64 `json:"outputLimit"`
	// PolicyGeneration must equal the generation of the policy the pod
	// was made for (ServeOptions.PolicyGeneration).
	PolicyGeneration int64 `json:"policyGeneration"`
	// SkillHash must equal the hash of the skill the pod was made with
	// (ServeOptions.SkillHash); empty when it has none.
	SkillHash string `json:"skillHash,omitempty"`
	// Spans asks for the command's spans on its result.
	Spans bool `json:"spans,omitempty"`
}

// handoffLine is one line of the runner's answer to an accepted handoff:
// first {"state":"accepted"}, then, when the command ended,
// {"state":"done","result":{...}}.
type handoffLine struct {
	State  string  `json:"state"`
	Result *Result `json:"result,omitempty"`
}

// HandOff posts h to the warm sandbox's runner at addr ("host:port") over
// plain HTTP with the bearer secret, calls accepted (which may be nil) once
// the runner said it took the run, and returns the command's Result when
// it ended. c must have no Timeout of its own, since commands run for
// minutes: HandOff obeys ctx. Nil means http.DefaultClient.
//
// An error wraps ErrNotHandedOver when the command did not start in that
// pod: the request could not reach the runner (the connection could not
// be made) or the runner refused it with a 4xx status, whose reason the
// error gives. Any other error (the connection broke once the request was
// sent, the answer ended before the result, a 5xx status, ctx ended) means
// the runner may have taken the run: posting h again, with the same
// RunUID, to the same runner attaches to that run and never starts the
// command twice.
func HandOff(ctx context.Context, c *http.Client, addr, secret string, h Handoff, accepted func()) (*Result, error) {
	if c == nil {
		c = http.DefaultClient
	}
	body, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("%w: failed to encode the handoff of run %s: %w", ErrNotHandedOver, h.RunUID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+HandoffPath, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: failed to make the handoff request for %s: %w", ErrNotHandedOver, addr, err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	// Each handoff has a connection of its own: a pod takes one command,
	// and a connection kept from an earlier handoff to the same address
	// (the pod's, or one that had its address before) fails as it is
	// reused, which reads as a command that may have been taken rather
	// than as the refusal a new connection meets.
	req.Close = true
	resp, err := c.Do(req)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return nil, fmt.Errorf("%w: failed to connect to the runner at %s: %w", ErrNotHandedOver, addr, err)
		}
		return nil, fmt.Errorf("failed to hand run %s over to the runner at %s, which may have taken it: %w", h.RunUID, addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return nil, fmt.Errorf("%w: the runner at %s refused run %s with %s: %s",
			ErrNotHandedOver, addr, h.RunUID, resp.Status, readReason(resp.Body))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the runner at %s answered the handoff of run %s with %s, and may have taken it: %s",
			addr, h.RunUID, resp.Status, readReason(resp.Body))
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 64<<10), maxHandoffLineBytes)
	first, err := readHandoffLine(lines)
	if err == nil && first.State != handoffAccepted {
		err = fmt.Errorf("first line has state %q, want %q", first.State, handoffAccepted)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read the answer of the runner at %s to run %s, which may have taken it: %w", addr, h.RunUID, err)
	}
	if accepted != nil {
		accepted()
	}
	done, err := readHandoffLine(lines)
	switch {
	case err != nil:
	case done.State != handoffDone:
		err = fmt.Errorf("line has state %q, want %q", done.State, handoffDone)
	case done.Result == nil:
		err = errors.New("the done line has no result")
	default:
		err = validate(done.Result)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read the result of run %s from the runner at %s, which took it: %w", h.RunUID, addr, err)
	}
	return done.Result, nil
}

// readHandoffLine reads and decodes the next line of the runner's answer.
func readHandoffLine(lines *bufio.Scanner) (handoffLine, error) {
	var l handoffLine
	if !lines.Scan() {
		if err := lines.Err(); err != nil {
			return l, err
		}
		return l, io.ErrUnexpectedEOF
	}
	if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
		return l, fmt.Errorf("failed to decode line: %w", err)
	}
	return l, nil
}

// readReason returns the start of a refusal's body as one line.
func readReason(body io.Reader) string {
	data, err := io.ReadAll(io.LimitReader(body, maxRefusalBytes))
	reason := strings.Join(strings.Fields(strings.ToValidUTF8(string(data), "\uFFFD")), " ")
	if reason == "" && err != nil {
		reason = fmt.Sprintf("(failed to read the reason: %v)", err)
	}
	return reason
}

// ServeOptions says how Serve waits for its command and what it runs it
// with.
type ServeOptions struct {
	// Listener is where Serve serves handoffs. Serve closes it before it
	// returns, and not before: no program of the command can bind the
	// port.
	Listener net.Listener
	// SecretSHA256 is the hex SHA-256 of the secret a handoff must bear.
	// The runner never knows the secret itself.
	SecretSHA256 string
	// PolicyGeneration is the generation of the policy the pod was made
	// for; a handoff must name the same.
	PolicyGeneration int64
	// SkillHash is the hash of the skill the pod was made with, empty when
	// none; a handoff must name the same.
	SkillHash string
	// IdleTimeout is how long Serve waits for a command.
	IdleTimeout time.Duration
	// MaxTimeout is the largest timeout a handoff may ask for.
	MaxTimeout time.Duration
	// ReadyFile, when set, is created, empty, once the runner is ready to
	// take a command (a startup probe runs "runner ready ReadyFile").
	ReadyFile string
	// Run is what every command gets: Executable, Dir, Env, Grace,
	// Kubeconfig, ServiceAccountDir, AwaitFence, FenceWait, ExecDirs and
	// Signals. Command, Policy, Timeout and OutputLimit come from the
	// handoff. Serve writes the kubeconfig and awaits the fence before it
	// serves.
	Run Options
	// ResultFile, when set, receives the termination message of a
	// command's result (Report) before the runner answers with it.
	ResultFile string
	// Log is the container log that receives the result line (Report).
	// Nil means the result goes to ResultFile only.
	Log io.Writer
	// Reported, when not nil, is called with the error Report returned
	// (nil when it wrote everything) once Serve reported a command's
	// result, so the caller knows it need not report it again.
	Reported func(error)
}

// Serve is the runner of a warm sandbox. It makes the runner
// non-dumpable where it can (Linux), writes the kubeconfig and awaits the
// network fence as Run would, then serves handoffs on o.Listener and
// creates o.ReadyFile. It waits for one handoff whose pins match, runs its
// command with Run (once o.ResultFile says that it took one, see
// takenResult), reports the result to o.Log and o.ResultFile, answers
// every request that waits for that run with it, and returns it.
//
// It never returns nil. When no command started it returns a result with
// NoCommand set and ExitRunnerFailure, and reports nothing: the caller
// does. That happens when a step before serving fails, when no handoff
// came within o.IdleTimeout, and when a signal from o.Run.Signals came
// before one. Signals after the handoff go to the command, as in Run.
func Serve(o ServeOptions) *Result {
	if o.Listener == nil {
		return noCommand(errors.New("failed to serve handoffs: no listener"))
	}
	defer func() { _ = o.Listener.Close() }()
	if shieldServe != nil {
		if err := shieldServe(); err != nil {
			return noCommand(err)
		}
	}
	want, err := hex.DecodeString(o.SecretSHA256)
	switch {
	case err != nil || len(want) != sha256.Size:
		return noCommand(errors.New("failed to serve handoffs: the secret's SHA-256 is not 64 hex digits"))
	case o.IdleTimeout <= 0:
		return noCommand(fmt.Errorf("failed to serve handoffs: the idle timeout must be positive, got %s", o.IdleTimeout))
	case o.MaxTimeout <= 0:
		return noCommand(fmt.Errorf("failed to serve handoffs: the maximum timeout must be positive, got %s", o.MaxTimeout))
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	run := o.Run.withDefaults()
	if err := prepareSandbox(run); err != nil {
		return noCommand(err)
	}
	// Done once for the pod: Run must not do them again.
	run.Kubeconfig, run.AwaitFence = "", ""

	s := newHandoffServer(want, o.PolicyGeneration, o.SkillHash, o.MaxTimeout)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: handoffHeaderTimeout}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(o.Listener) }()
	if o.ReadyFile != "" {
		if err := os.WriteFile(o.ReadyFile, nil, 0o644); err != nil {
			s.stop()
			_ = srv.Close()
			return noCommand(fmt.Errorf("failed to create ready file %s: %w", o.ReadyFile, err))
		}
	}
	h, sig, res := s.await(o.IdleTimeout, o.Run.Signals, served)
	if res != nil {
		_ = srv.Close()
		return res
	}
	if sig != nil {
		// The signal came as the handoff was taken: the command does not
		// start, and the result says so.
		res = &Result{ExitCode: ExitSignalBase + signalNumber(sig),
			Error: fmt.Sprintf("runner received signal %s as the command was handed over; the command did not start", sig)}
	} else if err := recordTaken(o.ResultFile); err != nil {
		res = &Result{ExitCode: ExitRunnerFailure, Error: err.Error() + "; the command did not start"}
	} else {
		run.Command, run.Policy = h.Command, h.Policy
		run.Timeout = time.Duration(h.TimeoutMillis) * time.Millisecond
		run.OutputLimit, run.Spans = h.OutputLimit, h.Spans
		res = Run(run)
	}
	err = Report(res, o.Log, o.ResultFile)
	if o.Reported != nil {
		o.Reported(err)
	}
	s.finish(res)
	ctx, cancel := context.WithTimeout(context.Background(), handoffDrainWait)
	defer cancel()
	select {
	case <-s.drained:
	case <-ctx.Done():
	}
	// Shutdown lets the answers end cleanly; Close ends what is left.
	_ = srv.Shutdown(ctx)
	_ = srv.Close()
	return res
}

// takenResult is what a warm runner's termination message says from the
// moment it took a command until it reports the command's result: a
// runner killed in between leaves it, and the run fails rather than run
// again. A runner killed before it took one leaves the message empty, and
// the run may go to another sandbox (see the operator's runsWarm).
var takenResult = &Result{ExitCode: ExitRunnerFailure,
	Error: "the sandbox reported no result: its runner ended after it took the command, so the command may have run"}

// recordTaken writes takenResult to the result file, if there is one,
// before the command starts.
func recordTaken(resultFile string) error {
	if resultFile == "" {
		return nil
	}
	_, termination, _, err := Encode(takenResult)
	if err == nil {
		err = os.WriteFile(resultFile, termination, 0o644)
	}
	if err != nil {
		return fmt.Errorf("failed to record in result file %s that a command was taken: %w", resultFile, err)
	}
	return nil
}

// shieldServe, when not nil, makes the runner non-dumpable before it
// serves, so that nothing in the pod reads its memory (see shieldRunner).
// It is set on Linux only.
var shieldServe func() error

// noCommand returns the result of a warm runner that ran no command.
func noCommand(err error) *Result {
	return &Result{ExitCode: ExitRunnerFailure, Error: err.Error(), NoCommand: true}
}

// prepareSandbox does what the sandbox needs before a command may start,
// as Run does it: it writes the kubeconfig when o.Kubeconfig is set, and
// awaits the network fence when o.AwaitFence is set. o must have its
// defaults (withDefaults).
func prepareSandbox(o Options) error {
	if o.Kubeconfig != "" {
		if _, err := WriteKubeconfig(o.Kubeconfig, o.ServiceAccountDir, getenvFrom(o.Env)); err != nil {
			return err
		}
	}
	if o.AwaitFence != "" {
		if err := AwaitFence(o.AwaitFence, o.FenceWait); err != nil {
			return err
		}
	}
	return nil
}

// handoffState is where a warm runner is: idle, then running one run and
// done with it, or stopped without one.
type handoffState int

const (
	stateIdle handoffState = iota
	stateRunning
	stateDone
	stateStopped
)

// handoffServer answers handoffs. It accepts one, hands it to Serve
// through taken, and answers every request for that run once Serve set
// the result (finish).
type handoffServer struct {
	wantSHA          []byte
	policyGeneration int64
	skillHash        string
	maxTimeout       time.Duration

	// taken receives the accepted handoff; it holds the only one.
	taken chan Handoff
	// finished is closed once result is set.
	finished chan struct{}
	// drained is closed once result is set and no request waits to
	// write it.
	drained chan struct{}

	mu     sync.Mutex
	state  handoffState
	runUID string
	result *Result
	// waiting counts the requests for the run that have not written the
	// result yet.
	waiting       int
	drainedClosed bool
}

// newHandoffServer returns an idle server that accepts handoffs bearing
// the secret whose SHA-256 is wantSHA and naming the pins given.
func newHandoffServer(wantSHA []byte, policyGeneration int64, skillHash string, maxTimeout time.Duration) *handoffServer {
	return &handoffServer{
		wantSHA:          wantSHA,
		policyGeneration: policyGeneration,
		skillHash:        skillHash,
		maxTimeout:       maxTimeout,
		taken:            make(chan Handoff, 1),
		finished:         make(chan struct{}),
		drained:          make(chan struct{}),
	}
}

// await waits for the accepted handoff, the idle timeout, the first
// signal, or the end of serving. It returns the handoff, with the signal
// that came as it was taken if one did, or the result of a runner that
// stopped waiting.
func (s *handoffServer) await(idle time.Duration, signals <-chan os.Signal, served <-chan error) (Handoff, os.Signal, *Result) {
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		select {
		case h := <-s.taken:
			return h, nil, nil
		case <-timer.C:
			if s.stop() {
				return Handoff{}, nil, noCommand(fmt.Errorf("no command was handed over within %s", idle))
			}
			// A handoff was taken at the same time: taken holds it.
		case sig, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			if s.stop() {
				return Handoff{}, nil, noCommand(fmt.Errorf("stopped by signal %s before a command was handed over", sig))
			}
			return <-s.taken, sig, nil
		case err := <-served:
			served = nil
			if s.stop() {
				return Handoff{}, nil, noCommand(fmt.Errorf("failed to serve handoffs: %w", err))
			}
		}
	}
}

// stop moves an idle server to stopped and reports whether it did; it
// does not when a handoff was taken.
func (s *handoffServer) stop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateIdle {
		return false
	}
	s.state = stateStopped
	return true
}

// finish sets the result of the run and wakes the requests that wait for
// it.
func (s *handoffServer) finish(res *Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = stateDone
	s.result = res
	close(s.finished)
	s.closeDrainedLocked()
}

// leave records that a request for the run no longer waits to write the
// result.
func (s *handoffServer) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting--
	s.closeDrainedLocked()
}

// closeDrainedLocked closes drained once the run is done and no request
// waits. s.mu must be held.
func (s *handoffServer) closeDrainedLocked() {
	if s.state == stateDone && s.waiting == 0 && !s.drainedClosed {
		s.drainedClosed = true
		close(s.drained)
	}
}

// ServeHTTP answers a request: a POST of a Handoff to HandoffPath bearing
// the secret, or a refusal.
func (s *handoffServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != HandoffPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST hands a command over", http.StatusMethodNotAllowed)
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "the handoff secret is wrong or missing", http.StatusUnauthorized)
		return
	}
	h, status, err := decodeHandoff(w, r)
	if err == nil {
		status, err = s.take(h)
	}
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	defer s.leave()
	s.answer(w, r)
}

// authorized reports whether r bears the secret: a bearer token whose
// SHA-256 is the one the server knows, compared in constant time.
func (s *handoffServer) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], s.wantSHA) == 1
}

// decodeHandoff reads the Handoff in r's body, at most MaxHandoffBytes of
// one JSON document with no unknown field, and returns it, or the status
// and reason of a refusal.
func decodeHandoff(w http.ResponseWriter, r *http.Request) (Handoff, int, error) {
	var h Handoff
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxHandoffBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(&h)
	if err == nil {
		switch extra := dec.Decode(&struct{}{}); {
		case extra == io.EOF:
		case extra == nil:
			err = errors.New("more than one JSON document")
		default:
			err = extra
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return h, http.StatusRequestEntityTooLarge, fmt.Errorf("the handoff is larger than %d bytes", MaxHandoffBytes)
	case err != nil:
		return h, http.StatusBadRequest, fmt.Errorf("failed to decode the handoff: %v", err)
	case h.RunUID == "":
		return h, http.StatusBadRequest, errors.New("the handoff has no runUID")
	}
	return h, 0, nil
}

// take accepts h when the server is idle and its pins match, or attaches
// to the run already taken when h names the same RunUID. It returns the
// status and reason of a refusal otherwise. An accepted handoff goes to
// taken.
func (s *handoffServer) take(h Handoff) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateStopped:
		return http.StatusGone, errors.New("this sandbox stopped waiting for a command")
	case stateRunning, stateDone:
		if h.RunUID != s.runUID {
			return http.StatusConflict, fmt.Errorf("this sandbox already took another run (%s)", s.runUID)
		}
		s.waiting++
		return 0, nil
	}
	if err := s.check(h); err != nil {
		return http.StatusUnprocessableEntity, err
	}
	s.state = stateRunning
	s.runUID = h.RunUID
	s.waiting++
	s.taken <- h
	return 0, nil
}

// check verifies that h is complete and names the pins of this sandbox.
func (s *handoffServer) check(h Handoff) error {
	switch {
	case h.Command == "":
		return errors.New("the handoff has no command")
	case h.Policy == "":
		return errors.New("the handoff has no policy: a command is never run unjudged")
	case h.TimeoutMillis <= 0:
		return fmt.Errorf("timeoutMillis must be positive, got %d", h.TimeoutMillis)
	case h.TimeoutMillis > s.maxTimeout.Milliseconds():
		return fmt.Errorf("timeoutMillis %d is more than this sandbox's maximum of %d (%s)",
			h.TimeoutMillis, s.maxTimeout.Milliseconds(), s.maxTimeout)
	case h.OutputLimit <= 0:
		return fmt.Errorf("outputLimit must be positive, got %d", h.OutputLimit)
	case h.PolicyGeneration != s.policyGeneration:
		return fmt.Errorf("policyGeneration %d does not match this sandbox's %d", h.PolicyGeneration, s.policyGeneration)
	case h.SkillHash != s.skillHash:
		return fmt.Errorf("skillHash %q does not match this sandbox's %q", h.SkillHash, s.skillHash)
	}
	return nil
}

// answer writes the answer to a request for the run: the accepted line at
// once, then the done line with the result once the run finished, unless
// the request went away first.
func (s *handoffServer) answer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := writeHandoffLine(w, rc, handoffLine{State: handoffAccepted}); err != nil {
		return
	}
	select {
	case <-s.finished:
	case <-r.Context().Done():
		return
	}
	s.mu.Lock()
	res := s.result
	s.mu.Unlock()
	_ = writeHandoffLine(w, rc, handoffLine{State: handoffDone, Result: res})
}

// writeHandoffLine writes l as one line and flushes it to the client.
func writeHandoffLine(w io.Writer, rc *http.ResponseController, l handoffLine) error {
	doc, err := marshal(l)
	if err != nil {
		return err
	}
	if _, err := w.Write(append(doc, '\n')); err != nil {
		return err
	}
	return rc.Flush()
}
