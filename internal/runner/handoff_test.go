package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testSecret is the handoff secret of the tests; the runner knows only
// testSecretSHA.
const testSecret = "s3cret-handoff"

var testSecretSHA = func() string {
	sum := sha256.Sum256([]byte(testSecret))
	return hex.EncodeToString(sum[:])
}()

// Pins of the tests' warm sandboxes.
const (
	testGeneration = 3
	testSkillHash  = "skill-1"
	testMaxTimeout = 30 * time.Second
)

// warmRunner is a Serve running in the test, on a port of its own.
type warmRunner struct {
	addr       string
	dir        string
	readyFile  string
	resultFile string
	signals    chan os.Signal
	// log is Serve's log; read it only once done delivered the result.
	log *bytes.Buffer
	// done receives what Serve returned.
	done chan *Result
}

// startWarm starts Serve on 127.0.0.1 with this machine's program folders
// and the tests' pins, after change (which may be nil) changed its
// options, and waits until it is ready when it has a ready file.
func startWarm(t *testing.T, change func(*ServeOptions)) *warmRunner {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &warmRunner{addr: l.Addr().String(), dir: dir, readyFile: filepath.Join(dir, ".ready"),
		resultFile: filepath.Join(dir, "termination-log"), signals: make(chan os.Signal, 4),
		log: &bytes.Buffer{}, done: make(chan *Result, 1)}
	o := ServeOptions{
		Listener:         l,
		SecretSHA256:     testSecretSHA,
		PolicyGeneration: testGeneration,
		SkillHash:        testSkillHash,
		IdleTimeout:      time.Minute,
		MaxTimeout:       testMaxTimeout,
		ReadyFile:        w.readyFile,
		Run:              Options{Dir: dir, Grace: time.Second, Signals: w.signals, ExecDirs: hostExecDirs},
		ResultFile:       w.resultFile,
		Log:              w.log,
	}
	if change != nil {
		change(&o)
	}
	go func() { w.done <- Serve(o) }()
	t.Cleanup(func() {
		// A runner still waiting is stopped, so no test leaves one behind.
		select {
		case w.signals <- syscall.SIGTERM:
		default:
		}
		select {
		case <-w.done:
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return after SIGTERM")
		}
	})
	if o.ReadyFile != "" {
		waitForServeReady(t, w)
	}
	return w
}

// waitForServeReady waits for the ready file, or for Serve to return
// early, which fails the test.
func waitForServeReady(t *testing.T, w *warmRunner) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(w.readyFile); err == nil {
			return
		}
		select {
		case res := <-w.done:
			w.done <- res
			t.Fatalf("Serve returned before it was ready: %+v", res)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 10s", w.readyFile)
		}
	}
}

// result waits for what Serve returned.
func (w *warmRunner) result(t *testing.T) *Result {
	t.Helper()
	select {
	case res := <-w.done:
		w.done <- res
		return res
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return")
		return nil
	}
}

// handoff returns a handoff of command that matches the tests' pins.
func handoff(command string) Handoff {
	return Handoff{RunUID: "run-1", Command: command, Policy: approvedAll, TimeoutMillis: 10_000,
		OutputLimit: 1000, PolicyGeneration: testGeneration, SkillHash: testSkillHash}
}

// handOff hands h to the runner at addr with secret, with a deadline.
func handOff(t *testing.T, addr, secret string, h Handoff, accepted func()) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return HandOff(ctx, &http.Client{}, addr, secret, h, accepted)
}

// post sends body to the runner as is and returns the status and body of
// its answer.
func post(t *testing.T, method, url, auth string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// lineCount returns the number of lines in path, 0 when it is missing.
func lineCount(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// wantNotHandedOver fails the test unless err wraps ErrNotHandedOver and
// says every one of has.
func wantNotHandedOver(t *testing.T, err error, has ...string) {
	t.Helper()
	if !errors.Is(err, ErrNotHandedOver) {
		t.Fatalf("error = %v, want one wrapping ErrNotHandedOver", err)
	}
	for _, s := range has {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

func TestServeRunsHandedOverCommand(t *testing.T) {
	w := startWarm(t, nil)
	accepted := false
	res, err := handOff(t, w.addr, testSecret, handoff("echo hi"), func() { accepted = true })
	if err != nil {
		t.Fatal(err)
	}
	if !accepted {
		t.Error("the accepted callback did not fire")
	}
	if res.ExitCode != 0 || res.Stdout != "hi\n" || res.Error != "" || res.NoCommand {
		t.Errorf("result = %+v, want exit 0 and stdout \"hi\\n\"", res)
	}
	served := w.result(t)
	if !reflect.DeepEqual(served, res) {
		t.Errorf("Serve returned %+v, the client got %+v", served, res)
	}
	msg, err := os.ReadFile(w.resultFile)
	if err != nil {
		t.Fatalf("result file: %v", err)
	}
	written, err := ReadResult(string(msg), func() ([]byte, error) { return w.log.Bytes(), nil })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(written, res) {
		t.Errorf("result file holds %+v, the client got %+v", written, res)
	}
	if !strings.HasPrefix(w.log.String(), LogPrefix) {
		t.Errorf("log = %q, want the result line", w.log.String())
	}
	// Serve closed the port once it returned.
	if _, err := handOff(t, w.addr, testSecret, handoff("echo again"), nil); !errors.Is(err, ErrNotHandedOver) {
		t.Errorf("handoff after Serve returned: %v, want ErrNotHandedOver", err)
	}
}

// TestServeRecordsTheTakenCommandBeforeItStarts: while the command runs,
// the result file already says a command was taken, so a runner killed
// then leaves a termination message that fails the run rather than let it
// run again; before any handoff the file is empty, and once the command
// ended it holds the command's result.
func TestServeRecordsTheTakenCommandBeforeItStarts(t *testing.T) {
	w := startWarm(t, nil)
	if lineCount(t, w.resultFile) != 0 {
		t.Fatal("the result file holds something before any handoff")
	}
	res, err := handOff(t, w.addr, testSecret, handoff("cat "+w.resultFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := ReadResult(res.Stdout, nil)
	if err != nil {
		t.Fatalf("the command saw %q in the result file: %v", res.Stdout, err)
	}
	if !reflect.DeepEqual(seen, takenResult) || seen.NoCommand {
		t.Errorf("while the command ran, the result file said %+v, want %+v", seen, takenResult)
	}
	msg, err := os.ReadFile(w.resultFile)
	if err != nil {
		t.Fatal(err)
	}
	written, err := ReadResult(string(msg), func() ([]byte, error) { return w.log.Bytes(), nil })
	if err != nil || !reflect.DeepEqual(written, res) {
		t.Errorf("once the command ended, the result file holds %+v (%v), want %+v", written, err, res)
	}
}

func TestServeRefusesWrongSecret(t *testing.T) {
	w := startWarm(t, nil)
	marker := filepath.Join(w.dir, "ran")
	h := handoff("echo ran >> " + marker)
	for _, secret := range []string{"wrong", "", testSecret + "x", strings.ToUpper(testSecret)} {
		_, err := handOff(t, w.addr, secret, h, func() { t.Errorf("secret %q: accepted", secret) })
		wantNotHandedOver(t, err, "401")
	}
	url := "http://" + w.addr + HandoffPath
	body := `{"runUID":"run-1","command":"true","policy":"{}","timeoutMillis":1000,"outputLimit":10,"policyGeneration":3,"skillHash":"skill-1"}`
	for _, auth := range []string{"", testSecret, "Basic " + testSecret, "Bearer", "Bearer " + testSecretSHA} {
		if status, _ := post(t, http.MethodPost, url, auth, strings.NewReader(body)); status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, status)
		}
	}
	if n := lineCount(t, marker); n != 0 {
		t.Fatalf("the command ran %d times without the secret", n)
	}
	res, err := handOff(t, w.addr, testSecret, h, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("handoff with the secret: %+v, %v", res, err)
	}
	if n := lineCount(t, marker); n != 1 {
		t.Errorf("the command ran %d times, want 1", n)
	}
}

func TestServeRefusesMismatchAndStaysIdle(t *testing.T) {
	w := startWarm(t, nil)
	marker := filepath.Join(w.dir, "ran")
	good := handoff("echo ran >> " + marker)
	cases := []struct {
		name   string
		change func(*Handoff)
		has    string
	}{
		{"other policy generation", func(h *Handoff) { h.PolicyGeneration = 4 }, "policyGeneration 4"},
		{"other skill", func(h *Handoff) { h.SkillHash = "skill-2" }, "skillHash"},
		{"no skill", func(h *Handoff) { h.SkillHash = "" }, "skillHash"},
		{"no timeout", func(h *Handoff) { h.TimeoutMillis = 0 }, "timeoutMillis"},
		{"negative timeout", func(h *Handoff) { h.TimeoutMillis = -1 }, "timeoutMillis"},
		{"timeout over the maximum", func(h *Handoff) { h.TimeoutMillis = testMaxTimeout.Milliseconds() + 1 }, "maximum"},
		{"no output limit", func(h *Handoff) { h.OutputLimit = 0 }, "outputLimit"},
		{"no command", func(h *Handoff) { h.Command = "" }, "no command"},
		{"no policy", func(h *Handoff) { h.Policy = "" }, "no policy"},
		{"no run UID", func(h *Handoff) { h.RunUID = "" }, "runUID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := good
			tc.change(&h)
			_, err := handOff(t, w.addr, testSecret, h, func() { t.Error("accepted") })
			wantNotHandedOver(t, err, tc.has)
		})
	}
	url := "http://" + w.addr + HandoffPath
	bearer := "Bearer " + testSecret
	raw := []struct {
		name, body string
		status     int
	}{
		{"not JSON", "{", http.StatusBadRequest},
		{"unknown field", `{"runUID":"run-1","cmd":"true"}`, http.StatusBadRequest},
		{"two documents", `{"runUID":"run-1"} {"runUID":"run-2"}`, http.StatusBadRequest},
		{"too large", `{"policy":"` + strings.Repeat("a", MaxHandoffBytes) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for _, tc := range raw {
		if status, reason := post(t, http.MethodPost, url, bearer, strings.NewReader(tc.body)); status != tc.status || reason == "" {
			t.Errorf("%s: status %d (%q), want %d with a reason", tc.name, status, reason, tc.status)
		}
	}
	if status, _ := post(t, http.MethodGet, url, bearer, nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", status)
	}
	if status, _ := post(t, http.MethodPost, "http://"+w.addr+"/v1/other", bearer, strings.NewReader("{}")); status != http.StatusNotFound {
		t.Errorf("other path: status %d, want 404", status)
	}
	if n := lineCount(t, marker); n != 0 {
		t.Fatalf("a refused handoff ran %d times", n)
	}
	res, err := handOff(t, w.addr, testSecret, good, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("handoff after the refusals: %+v, %v", res, err)
	}
	if n := lineCount(t, marker); n != 1 {
		t.Errorf("the command ran %d times, want 1", n)
	}
}

// TestServeTakesOneRun: while the command runs, a handoff of another run
// is refused (409), and the same run handed over again (an operator that
// restarted) gets the same result: the command runs once.
func TestServeTakesOneRun(t *testing.T) {
	w := startWarm(t, nil)
	marker, release := filepath.Join(w.dir, "ran"), filepath.Join(w.dir, "release")
	h := handoff(fmt.Sprintf("echo ran >> %s; while [ ! -e %s ]; do sleep 0.01; done; echo hi", marker, release))
	type outcome struct {
		res *Result
		err error
	}
	results := make(chan outcome, 2)
	for i := range 2 {
		accepted := make(chan struct{})
		go func() {
			res, err := handOff(t, w.addr, testSecret, h, func() { close(accepted) })
			results <- outcome{res, err}
		}()
		select {
		case <-accepted:
		case o := <-results:
			t.Fatalf("handoff %d ended before it was accepted: %+v, %v", i+1, o.res, o.err)
		case <-time.After(20 * time.Second):
			t.Fatalf("handoff %d was not accepted", i+1)
		}
	}
	other := h
	other.RunUID = "run-2"
	_, err := handOff(t, w.addr, testSecret, other, func() { t.Error("another run was accepted") })
	wantNotHandedOver(t, err, "409", "already took another run")
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []*Result
	for range 2 {
		o := <-results
		if o.err != nil {
			t.Fatal(o.err)
		}
		got = append(got, o.res)
	}
	if got[0].ExitCode != 0 || got[0].Stdout != "hi\n" || !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("results = %+v and %+v, want the same, exit 0 and stdout \"hi\\n\"", got[0], got[1])
	}
	if n := lineCount(t, marker); n != 1 {
		t.Errorf("the command ran %d times, want 1", n)
	}
	if res := w.result(t); !reflect.DeepEqual(res, got[0]) {
		t.Errorf("Serve returned %+v, the clients got %+v", res, got[0])
	}
}

// TestHandoffServerStates drives the server's state machine without
// Serve, to see what it answers once the run is done and once it
// stopped waiting, which Serve does only for a moment before it closes
// the port.
func TestHandoffServerStates(t *testing.T) {
	sum := sha256.Sum256([]byte(testSecret))
	s := newHandoffServer(sum[:], testGeneration, testSkillHash, testMaxTimeout)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	h := handoff("echo hi")

	type outcome struct {
		res *Result
		err error
	}
	first := make(chan outcome, 1)
	go func() {
		res, err := handOff(t, addr, testSecret, h, nil)
		first <- outcome{res, err}
	}()
	var taken Handoff
	select {
	case taken = <-s.taken:
	case <-time.After(20 * time.Second):
		t.Fatal("the handoff was not taken")
	}
	if taken != h {
		t.Errorf("taken %+v, want %+v", taken, h)
	}
	want := &Result{ExitCode: 3, Stdout: "out", StdoutBytes: 3, DurationMillis: 7}
	s.finish(want)
	if o := <-first; o.err != nil || !reflect.DeepEqual(o.res, want) {
		t.Errorf("first handoff: %+v, %v, want %+v", o.res, o.err, want)
	}
	select {
	case <-s.drained:
	case <-time.After(20 * time.Second):
		t.Error("drained was not closed once the answer was written")
	}
	// The same run again once it is done: the result at once.
	if res, err := handOff(t, addr, testSecret, h, nil); err != nil || !reflect.DeepEqual(res, want) {
		t.Errorf("same run after it ended: %+v, %v, want %+v", res, err, want)
	}
	other := h
	other.RunUID = "run-2"
	_, err := handOff(t, addr, testSecret, other, nil)
	wantNotHandedOver(t, err, "409")
	if len(s.taken) != 0 {
		t.Error("a second handoff was taken")
	}
	if s.stop() {
		t.Error("a server that took a run stopped")
	}

	idle := newHandoffServer(sum[:], testGeneration, testSkillHash, testMaxTimeout)
	if !idle.stop() {
		t.Fatal("an idle server did not stop")
	}
	ts2 := httptest.NewServer(idle)
	t.Cleanup(ts2.Close)
	_, err = handOff(t, strings.TrimPrefix(ts2.URL, "http://"), testSecret, h, nil)
	wantNotHandedOver(t, err, "410")
}

func TestServeIdleTimeout(t *testing.T) {
	w := startWarm(t, func(o *ServeOptions) { o.IdleTimeout = 300 * time.Millisecond })
	res := w.result(t)
	if !res.NoCommand || res.ExitCode != ExitRunnerFailure || !strings.Contains(res.Error, "no command was handed over within 300ms") {
		t.Errorf("result = %+v", res)
	}
	if _, err := os.Stat(w.resultFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("result file: %v, want none: the caller reports a result without a command", err)
	}
	_, err := handOff(t, w.addr, testSecret, handoff("true"), nil)
	wantNotHandedOver(t, err)
}

func TestServeStoppedBySignalBeforeHandoff(t *testing.T) {
	w := startWarm(t, nil)
	w.signals <- syscall.SIGTERM
	res := w.result(t)
	if !res.NoCommand || res.ExitCode != ExitRunnerFailure ||
		!strings.Contains(res.Error, "stopped by signal terminated before a command was handed over") {
		t.Errorf("result = %+v", res)
	}
	_, err := handOff(t, w.addr, testSecret, handoff("true"), nil)
	wantNotHandedOver(t, err)
}

func TestServeForwardsSignalToCommand(t *testing.T) {
	w := startWarm(t, nil)
	started := filepath.Join(w.dir, "started")
	h := handoff(fmt.Sprintf("echo > %s; sleep 20", started))
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := handOff(t, w.addr, testSecret, h, nil)
		done <- outcome{res, err}
	}()
	waitForFile(t, started, 10*time.Second)
	start := time.Now()
	w.signals <- syscall.SIGTERM
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if elapsed := time.Since(start); elapsed > 15*time.Second {
		t.Errorf("the command took %s to stop", elapsed)
	}
	if o.res.ExitCode != ExitSignalBase+int(syscall.SIGTERM) || o.res.NoCommand || !strings.Contains(o.res.Error, "signal") {
		t.Errorf("result = %+v", o.res)
	}
}

func TestServeFenceNotInForce(t *testing.T) {
	// An address that answers: the fence is not in force.
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = open.Close() })
	go func() {
		for {
			c, err := open.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	var readyFile string
	w := startWarm(t, func(o *ServeOptions) {
		o.Run.AwaitFence, o.Run.FenceWait = open.Addr().String(), 100*time.Millisecond
		readyFile, o.ReadyFile = o.ReadyFile, ""
	})
	res := w.result(t)
	if !res.NoCommand || res.ExitCode != ExitRunnerFailure || !strings.Contains(res.Error, "fence") {
		t.Errorf("result = %+v", res)
	}
	if _, err := os.Stat(readyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ready file: %v, want none", err)
	}
	_, err = handOff(t, w.addr, testSecret, handoff("true"), nil)
	wantNotHandedOver(t, err)
}

func TestServeRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name   string
		change func(*ServeOptions)
		has    string
	}{
		{"secret hash not hex", func(o *ServeOptions) { o.SecretSHA256 = strings.Repeat("z", 64) }, "64 hex digits"},
		{"secret hash too short", func(o *ServeOptions) { o.SecretSHA256 = "abcd" }, "64 hex digits"},
		{"no idle timeout", func(o *ServeOptions) { o.IdleTimeout = 0 }, "idle timeout"},
		{"no maximum timeout", func(o *ServeOptions) { o.MaxTimeout = 0 }, "maximum timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := startWarm(t, func(o *ServeOptions) { tc.change(o); o.ReadyFile = "" })
			if res := w.result(t); !res.NoCommand || res.ExitCode != ExitRunnerFailure || !strings.Contains(res.Error, tc.has) {
				t.Errorf("result = %+v, want an error saying %q", res, tc.has)
			}
		})
	}
}

func TestHandOffUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = handOff(t, addr, testSecret, handoff("true"), func() { t.Error("accepted") })
	wantNotHandedOver(t, err, addr)
}

// TestHandOffCannotKnow: once the request reached a runner, an answer
// that breaks off or fails leaves the caller unable to know whether the
// command ran, which ErrNotHandedOver must never claim.
func TestHandOffCannotKnow(t *testing.T) {
	accepted := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"state":"accepted"}`+"\n")
		_ = http.NewResponseController(w).Flush()
	}
	cases := []struct {
		name         string
		handler      http.HandlerFunc
		wantAccepted bool
	}{
		{name: "connection dropped after accepted", wantAccepted: true, handler: func(w http.ResponseWriter, r *http.Request) {
			accepted(w)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_ = conn.Close()
		}},
		{name: "answer ends without a result", wantAccepted: true, handler: func(w http.ResponseWriter, r *http.Request) {
			accepted(w)
		}},
		{name: "done line without a result", wantAccepted: true, handler: func(w http.ResponseWriter, r *http.Request) {
			accepted(w)
			_, _ = io.WriteString(w, `{"state":"done"}`+"\n")
		}},
		{name: "result out of range", wantAccepted: true, handler: func(w http.ResponseWriter, r *http.Request) {
			accepted(w)
			_, _ = io.WriteString(w, `{"state":"done","result":{"exitCode":300}}`+"\n")
		}},
		{name: "connection dropped before an answer", handler: func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_ = conn.Close()
		}},
		{name: "server error", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "broken", http.StatusInternalServerError)
		}},
		{name: "no accepted line", handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "hello\n")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(tc.handler)
			t.Cleanup(ts.Close)
			wasAccepted := false
			res, err := handOff(t, strings.TrimPrefix(ts.URL, "http://"), testSecret, handoff("true"), func() { wasAccepted = true })
			if err == nil || errors.Is(err, ErrNotHandedOver) {
				t.Errorf("HandOff = %+v, %v, want an error that does not wrap ErrNotHandedOver", res, err)
			}
			if wasAccepted != tc.wantAccepted {
				t.Errorf("accepted callback fired: %t, want %t", wasAccepted, tc.wantAccepted)
			}
		})
	}
}

// TestHandOffObeysContext: a caller that gives up while the command runs
// gets the context's error, not ErrNotHandedOver.
func TestHandOffObeysContext(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"state":"accepted"}`+"\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := HandOff(ctx, nil, strings.TrimPrefix(ts.URL, "http://"), testSecret, handoff("true"), cancel)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotHandedOver) {
		t.Errorf("error = %v, want context.Canceled and not ErrNotHandedOver", err)
	}
}

// TestNoCommandSurvivesEncoding: NoCommand comes back from the termination
// message, and from the log when the result only fits there.
func TestNoCommandSurvivesEncoding(t *testing.T) {
	for _, r := range []*Result{
		{ExitCode: ExitRunnerFailure, Error: "no command was handed over within 10m0s", NoCommand: true},
		{ExitCode: ExitRunnerFailure, Stdout: strings.Repeat("x", 2*MaxTerminationMessageBytes), StdoutBytes: 2 * MaxTerminationMessageBytes, NoCommand: true},
	} {
		line, msg, _, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		summary, _, err := ParseTerminationMessage(string(msg))
		if err != nil || !summary.NoCommand {
			t.Errorf("termination message %.200q: %+v, %v, want NoCommand", msg, summary, err)
		}
		got, err := ReadResult(string(msg), func() ([]byte, error) { return line, nil })
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("ReadResult = %+v, %v, want %+v", got, err, r)
		}
	}
}

// TestServeWritesKubeconfigOnce: the kubeconfig is written before the
// runner is ready, and not again when the command runs.
func TestServeWritesKubeconfigOnce(t *testing.T) {
	saDir := t.TempDir()
	for name, content := range map[string]string{"token": "t", "ca.crt": "ca", "namespace": "ns"} {
		writeFile(t, saDir, name, content, 0o600)
	}
	kubeconfig := filepath.Join(t.TempDir(), ".kube", "config")
	w := startWarm(t, func(o *ServeOptions) {
		o.Run.Kubeconfig, o.Run.ServiceAccountDir = kubeconfig, saDir
		o.Run.Env = []string{"PATH=/usr/bin:/bin", "KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443"}
	})
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Fatalf("kubeconfig not written before the runner was ready: %v", err)
	}
	if err := os.Remove(kubeconfig); err != nil {
		t.Fatal(err)
	}
	res, err := handOff(t, w.addr, testSecret, handoff("echo ok"), nil)
	if err != nil || res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Fatalf("handoff: %+v, %v", res, err)
	}
	if _, err := os.Stat(kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kubeconfig after the command: %v, want it not written again", err)
	}
}
