package runner

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// LogPrefix starts the line that carries the full result in the container
// log. The rest of the line is the payload: the standard base64 encoding
// (with padding) of the gzip compression of the result's JSON document.
const LogPrefix = "KUBESKILLS-RESULT "

// MaxTerminationMessageBytes is the size limit Kubernetes applies to a
// container's termination message. A result whose JSON document fits is
// written there whole; a larger one is replaced by a summary that points to
// the log.
const MaxTerminationMessageBytes = 4096

// MaxResultBytes bounds the decompressed JSON document ParseLog accepts, so a
// hostile log line cannot exhaust the controller's memory.
const MaxResultBytes = 32 << 20

// maxSummaryErrorBytes bounds the error text copied into a summary so the
// summary always fits in a termination message.
const maxSummaryErrorBytes = 1024

// ErrNoResult is returned when a termination message or a log holds no
// result at all, for example because the runner was killed before it could
// write one.
var ErrNoResult = errors.New("no runner result found")

// Result is what the runner reports about one command.
type Result struct {
	// ExitCode is the runner's own exit code, so it always matches the exit
	// code of the container: the command's exit status (128+N when the
	// command was killed by signal N), ExitTimeout when the timeout expired,
	// 128+N when the runner was stopped by signal N, ExitCannotExecute when
	// the runner refused the command (see Error), or one of
	// ExitRunnerFailure, ExitCannotExecute and ExitNotFound when the command
	// could not be run.
	ExitCode int `json:"exitCode"`
	// Stdout is the captured standard output, at most the output limit in
	// bytes, always valid UTF-8 (see Run).
	Stdout string `json:"stdout"`
	// Stderr is the captured standard error, with the same rules as Stdout.
	Stderr string `json:"stderr"`
	// StdoutTruncated is true when Stdout holds less than the command wrote.
	StdoutTruncated bool `json:"stdoutTruncated"`
	// StderrTruncated is true when Stderr holds less than the command wrote.
	StderrTruncated bool `json:"stderrTruncated"`
	// StdoutBytes counts every byte the command wrote to standard output,
	// including the bytes past the limit that were discarded.
	StdoutBytes int64 `json:"stdoutBytes"`
	// StderrBytes counts every byte the command wrote to standard error.
	StderrBytes int64 `json:"stderrBytes"`
	// DurationMillis is the time from starting the shell to its exit.
	DurationMillis int64 `json:"durationMillis"`
	// TimedOut is true when the runner stopped the command at its timeout.
	TimedOut bool `json:"timedOut"`
	// Error explains, for people, why the command did not run to its own
	// end: the runner refused it (the refusal line, starting with
	// RefusalPrefix), the shell could not be started, the runner was
	// stopped by a signal, or its output could not be read. Empty
	// otherwise.
	Error string `json:"error,omitempty"`
	// NoCommand is true on the result of a warm sandbox's runner (Serve)
	// that ended without ever taking a command: no command was handed over
	// before its idle timeout, or a signal stopped it first. Nothing ran,
	// so the run it was meant for may still run elsewhere.
	NoCommand bool `json:"noCommand,omitempty"`
	// Spans are the command's and its programs' (Span), when the run
	// asked for them; SpansDropped counts the programs past maxSpans.
	Spans        []Span `json:"spans,omitempty"`
	SpansDropped int    `json:"spansDropped,omitempty"`

	// LogSHA256 is set only on a summary returned by ParseTerminationMessage
	// when the full result is in the log: pass it to ParseLog.
	LogSHA256 string `json:"-"`
}

// summary is the termination message written when the full result does not
// fit: every field but the captured output, and a pointer to the log line.
type summary struct {
	Result
	// InLog is true when the full result must be read from the log.
	InLog bool `json:"inLog,omitempty"`
	// SHA256 is the hex SHA-256 of the payload of the log line (the base64
	// text after LogPrefix).
	SHA256 string `json:"sha256,omitempty"`
}

// Encode returns the log line (ending in a newline) and the termination
// message for r, and the SHA-256 of the log line's payload.
func Encode(r *Result) (logLine, termination []byte, sha string, err error) {
	doc, err := marshal(r)
	if err != nil {
		return nil, nil, "", err
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(doc); err != nil {
		return nil, nil, "", fmt.Errorf("failed to compress result: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, nil, "", fmt.Errorf("failed to compress result: %w", err)
	}
	payload := base64.StdEncoding.EncodeToString(zipped.Bytes())
	sha = payloadSHA(payload)
	logLine = []byte(LogPrefix + payload + "\n")

	if len(doc) <= MaxTerminationMessageBytes {
		return logLine, doc, sha, nil
	}
	termination, err = marshalSummary(r, sha)
	if err != nil {
		return nil, nil, "", err
	}
	return logLine, termination, sha, nil
}

// marshalSummary encodes the summary that replaces a result too large for the
// termination message.
func marshalSummary(r *Result, sha string) ([]byte, error) {
	s := summary{Result: *r, InLog: true, SHA256: sha}
	s.Stdout, s.Stderr = "", ""
	if len(s.Error) > maxSummaryErrorBytes {
		s.Error = truncateUTF8(s.Error, maxSummaryErrorBytes)
	}
	doc, err := marshal(&s)
	if err != nil {
		return nil, err
	}
	if len(doc) > MaxTerminationMessageBytes {
		s.Error = ""
		return marshal(&s)
	}
	return doc, nil
}

// marshal encodes v as compact JSON without HTML escaping and without a
// trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("failed to encode result: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Report writes r as one framed line to log and, when resultFile is not
// empty, its termination message to resultFile. It tries both and returns
// the errors of both.
func Report(r *Result, log io.Writer, resultFile string) error {
	line, termination, _, err := Encode(r)
	if err != nil {
		return err
	}
	var errs []error
	if _, err := log.Write(line); err != nil {
		errs = append(errs, fmt.Errorf("failed to write result to log: %w", err))
	}
	if resultFile != "" {
		if err := os.WriteFile(resultFile, termination, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("failed to write result file %s: %w", resultFile, err))
		}
	}
	return errors.Join(errs...)
}

// ParseTerminationMessage decodes a termination message written by the
// runner. When needLog is true the message is only a summary: the returned
// Result has every field but Stdout and Stderr, its LogSHA256 is set, and the
// full result must be read with ParseLog(log, result.LogSHA256).
func ParseTerminationMessage(msg string) (result *Result, needLog bool, err error) {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return nil, false, ErrNoResult
	}
	var s summary
	if err := json.Unmarshal([]byte(msg), &s); err != nil {
		return nil, false, fmt.Errorf("failed to decode termination message: %w", err)
	}
	if err := validate(&s.Result); err != nil {
		return nil, false, fmt.Errorf("failed to validate termination message: %w", err)
	}
	if !s.InLog {
		return &s.Result, false, nil
	}
	if !isSHA256(s.SHA256) {
		return nil, false, fmt.Errorf("failed to validate termination message: sha256 %q is not a hex SHA-256", truncateUTF8(s.SHA256, 80))
	}
	r := s.Result
	r.Stdout, r.Stderr = "", ""
	r.LogSHA256 = strings.ToLower(s.SHA256)
	return &r, true, nil
}

// ParseLog finds the result line in a container log and decodes it. When
// wantSHA is not empty only the line whose payload has that SHA-256 is
// accepted, so a damaged or foreign line is rejected; when it is empty the
// last result line is used. Timestamps or other text before LogPrefix on the
// same line are ignored, as are lines ending in "\r\n".
func ParseLog(log []byte, wantSHA string) (*Result, error) {
	wantSHA = strings.ToLower(strings.TrimSpace(wantSHA))
	if wantSHA != "" && !isSHA256(wantSHA) {
		return nil, fmt.Errorf("failed to parse log: sha256 %q is not a hex SHA-256", truncateUTF8(wantSHA, 80))
	}
	var found []byte
	for line := range bytes.Lines(log) {
		i := bytes.Index(line, []byte(LogPrefix))
		if i < 0 {
			continue
		}
		payload := bytes.TrimSpace(line[i+len(LogPrefix):])
		if wantSHA != "" && payloadSHA(string(payload)) != wantSHA {
			continue
		}
		found = payload
	}
	if found == nil {
		if wantSHA != "" {
			return nil, fmt.Errorf("failed to find result with sha256 %s in log: %w", wantSHA, ErrNoResult)
		}
		return nil, ErrNoResult
	}
	return decodePayload(found)
}

// decodePayload reverses the encoding of a log line's payload.
func decodePayload(payload []byte) (*Result, error) {
	zipped := make([]byte, base64.StdEncoding.DecodedLen(len(payload)))
	n, err := base64.StdEncoding.Decode(zipped, payload)
	if err != nil {
		return nil, fmt.Errorf("failed to decode result payload: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped[:n]))
	if err != nil {
		return nil, fmt.Errorf("failed to decompress result payload: %w", err)
	}
	doc, err := io.ReadAll(io.LimitReader(zr, MaxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("failed to decompress result payload: %w", err)
	}
	if len(doc) > MaxResultBytes {
		return nil, fmt.Errorf("failed to decompress result payload: larger than %d bytes", MaxResultBytes)
	}
	var r Result
	if err := json.Unmarshal(doc, &r); err != nil {
		return nil, fmt.Errorf("failed to decode result payload: %w", err)
	}
	if err := validate(&r); err != nil {
		return nil, fmt.Errorf("failed to validate result payload: %w", err)
	}
	return &r, nil
}

// ReadResult decodes the termination message and, when it points to the log,
// calls readLog and decodes the full result from it. The summary and the full
// result must agree on the exit code and the timeout flag.
func ReadResult(msg string, readLog func() ([]byte, error)) (*Result, error) {
	r, needLog, err := ParseTerminationMessage(msg)
	if err != nil || !needLog {
		return r, err
	}
	log, err := readLog()
	if err != nil {
		return nil, fmt.Errorf("failed to read log: %w", err)
	}
	full, err := ParseLog(log, r.LogSHA256)
	if err != nil {
		return nil, err
	}
	if full.ExitCode != r.ExitCode || full.TimedOut != r.TimedOut {
		return nil, fmt.Errorf("failed to match result in log with termination message: exit code %d/%d, timed out %t/%t",
			full.ExitCode, r.ExitCode, full.TimedOut, r.TimedOut)
	}
	return full, nil
}

// validate rejects documents that no runner writes.
func validate(r *Result) error {
	switch {
	case r.ExitCode < 0 || r.ExitCode > 255:
		return fmt.Errorf("exit code %d out of range 0-255", r.ExitCode)
	case r.StdoutBytes < 0 || r.StderrBytes < 0:
		return fmt.Errorf("negative byte count")
	case r.DurationMillis < 0:
		return fmt.Errorf("negative duration")
	}
	return nil
}

// payloadSHA returns the lowercase hex SHA-256 of a log line's payload.
func payloadSHA(payload string) string {
	sum := sha256.Sum256([]byte(payload))
	return hex.EncodeToString(sum[:])
}

// isSHA256 reports whether s is 64 hex digits.
func isSHA256(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
