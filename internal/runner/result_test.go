package runner

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// frame builds a log line around an arbitrary JSON document.
func frame(t testing.TB, doc []byte) (line []byte, sha string) {
	t.Helper()
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(doc); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	payload := base64.StdEncoding.EncodeToString(zipped.Bytes())
	return []byte(LogPrefix + payload + "\n"), payloadSHA(payload)
}

func TestSmallResultInTerminationMessage(t *testing.T) {
	want := &Result{ExitCode: 3, Stdout: "out <&> \"q\"\n", Stderr: "err\n", StdoutBytes: 12, StderrBytes: 4, DurationMillis: 17}
	line, termination, sha, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(termination) > MaxTerminationMessageBytes || bytes.Contains(termination, []byte("inLog")) {
		t.Errorf("termination message = %s", termination)
	}
	got, needLog, err := ParseTerminationMessage(string(termination) + "\n")
	if err != nil || needLog || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseTerminationMessage = %+v, %t, %v", got, needLog, err)
	}
	for _, s := range []string{sha, strings.ToUpper(sha), ""} {
		got, err = ParseLog(line, s)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseLog(sha %q) = %+v, %v", s, got, err)
		}
	}
}

func TestLargeResultThroughLog(t *testing.T) {
	res := hostRun(Options{Command: "yes 'line of output é' | head -c 30000; head -c 5000 /dev/urandom >&2", Policy: approvedAll,
		OutputLimit: 25000})
	if res.ExitCode != 0 || !res.StdoutTruncated || res.StderrTruncated {
		t.Fatalf("unexpected run: exit %d, error %q, flags %t %t", res.ExitCode, res.Error, res.StdoutTruncated, res.StderrTruncated)
	}
	dir := t.TempDir()
	resultFile := filepath.Join(dir, "termination-log")
	var log bytes.Buffer
	log.WriteString("2026-01-02T03:04:05Z some other line\n")
	if err := Report(res, &log, resultFile); err != nil {
		t.Fatal(err)
	}
	log.WriteString("trailing line without newline")
	msg, err := os.ReadFile(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg) > MaxTerminationMessageBytes {
		t.Fatalf("termination message is %d bytes", len(msg))
	}

	summary, needLog, err := ParseTerminationMessage(string(msg))
	if err != nil || !needLog {
		t.Fatalf("ParseTerminationMessage = %v, %t, %v", summary, needLog, err)
	}
	if summary.ExitCode != res.ExitCode || summary.StdoutBytes != res.StdoutBytes || !summary.StdoutTruncated ||
		summary.Stdout != "" || summary.LogSHA256 == "" {
		t.Errorf("summary = %+v", summary)
	}
	got, err := ParseLog(log.Bytes(), summary.LogSHA256)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, res) {
		t.Errorf("ParseLog result differs from the run's")
	}
	// Windows line ends and a timestamp prefix, as kubectl logs --timestamps
	// prints them.
	crlf := bytes.ReplaceAll(log.Bytes(), []byte("\n"), []byte("\r\n"))
	stamped := append([]byte("2026-01-02T03:04:06.123Z "), crlf...)
	if got, err := ParseLog(stamped, summary.LogSHA256); err != nil || !reflect.DeepEqual(got, res) {
		t.Errorf("ParseLog with CRLF and timestamps: %v", err)
	}
	got, err = ReadResult(string(msg), func() ([]byte, error) { return log.Bytes(), nil })
	if err != nil || !reflect.DeepEqual(got, res) {
		t.Errorf("ReadResult: %v", err)
	}
}

func TestSummaryAlwaysFits(t *testing.T) {
	res := &Result{ExitCode: ExitRunnerFailure, Stdout: strings.Repeat("x", 5000), Error: strings.Repeat("\x01é", 3000)}
	_, termination, sha, err := Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(termination) > MaxTerminationMessageBytes {
		t.Fatalf("summary is %d bytes", len(termination))
	}
	got, needLog, err := ParseTerminationMessage(string(termination))
	if err != nil || !needLog || got.LogSHA256 != sha || got.ExitCode != ExitRunnerFailure {
		t.Errorf("ParseTerminationMessage = %+v, %t, %v", got, needLog, err)
	}
}

func TestParseLogRejects(t *testing.T) {
	good := &Result{ExitCode: 1, Stdout: strings.Repeat("abc", 2000)}
	line, _, sha, err := Encode(good)
	if err != nil {
		t.Fatal(err)
	}
	corrupted := bytes.Clone(line)
	corrupted[len(LogPrefix)+40] ^= 0x01
	truncated := line[:len(line)/2]
	badExit, _ := frame(t, []byte(`{"exitCode":300}`))
	notJSON, _ := frame(t, []byte(`exitCode: 1`))
	bomb, _ := frame(t, bytes.Repeat([]byte(" "), MaxResultBytes+10))
	otherLine, otherSHA := frame(t, []byte(`{"exitCode":0,"stdout":"forged"}`))

	cases := []struct {
		name   string
		log    []byte
		sha    string
		noneIs bool
	}{
		{name: "corrupted frame with sha", log: corrupted, sha: sha, noneIs: true},
		{name: "corrupted frame without sha", log: corrupted},
		{name: "truncated frame without sha", log: truncated},
		{name: "wrong sha", log: line, sha: otherSHA, noneIs: true},
		{name: "sha not hex", log: line, sha: strings.Repeat("z", 64)},
		{name: "sha too short", log: line, sha: sha[:10]},
		{name: "no frame", log: []byte("hello\nworld\n"), noneIs: true},
		{name: "empty log", log: nil, noneIs: true},
		{name: "not base64", log: []byte(LogPrefix + "!!!!\n")},
		{name: "not gzip", log: []byte(LogPrefix + base64.StdEncoding.EncodeToString([]byte("plain")) + "\n")},
		{name: "not JSON", log: notJSON},
		{name: "exit code out of range", log: badExit},
		{name: "too large once decompressed", log: bomb},
		{name: "only a foreign frame", log: otherLine, sha: sha, noneIs: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLog(tc.log, tc.sha)
			if err == nil {
				t.Fatalf("ParseLog accepted %+v", got)
			}
			if errors.Is(err, ErrNoResult) != tc.noneIs {
				t.Errorf("err = %v, ErrNoResult %t", err, tc.noneIs)
			}
		})
	}
}

func TestParseLogPicksFrame(t *testing.T) {
	first := &Result{ExitCode: 0, Stdout: "first"}
	second := &Result{ExitCode: 2, Stdout: "second"}
	line1, _, sha1, err := Encode(first)
	if err != nil {
		t.Fatal(err)
	}
	line2, _, _, err := Encode(second)
	if err != nil {
		t.Fatal(err)
	}
	log := append(append(bytes.Clone(line1), "noise\n"...), line2...)
	if got, err := ParseLog(log, sha1); err != nil || got.Stdout != "first" {
		t.Errorf("ParseLog(sha of first) = %+v, %v", got, err)
	}
	if got, err := ParseLog(log, ""); err != nil || got.Stdout != "second" {
		t.Errorf("ParseLog(no sha) = %+v, %v", got, err)
	}
}

func TestParseTerminationMessageRejects(t *testing.T) {
	cases := []struct {
		name   string
		msg    string
		noneIs bool
	}{
		{name: "empty", msg: "", noneIs: true},
		{name: "blank", msg: " \n", noneIs: true},
		{name: "not JSON", msg: "Error: OOMKilled"},
		{name: "array", msg: "[1]"},
		{name: "in log without sha", msg: `{"exitCode":0,"inLog":true}`},
		{name: "in log with short sha", msg: `{"exitCode":0,"inLog":true,"sha256":"abc"}`},
		{name: "exit code negative", msg: `{"exitCode":-1}`},
		{name: "exit code too large", msg: `{"exitCode":256}`},
		{name: "negative bytes", msg: `{"exitCode":0,"stdoutBytes":-5}`},
		{name: "negative duration", msg: `{"exitCode":0,"durationMillis":-5}`},
		{name: "wrong type", msg: `{"exitCode":"0"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, needLog, err := ParseTerminationMessage(tc.msg)
			if err == nil {
				t.Fatalf("accepted: %+v, %t", got, needLog)
			}
			if errors.Is(err, ErrNoResult) != tc.noneIs {
				t.Errorf("err = %v, ErrNoResult %t", err, tc.noneIs)
			}
		})
	}
}

func TestReadResult(t *testing.T) {
	big := &Result{ExitCode: 1, Stdout: strings.Repeat("0123456789", 1000)}
	line, termination, _, err := Encode(big)
	if err != nil {
		t.Fatal(err)
	}
	other := *big
	other.ExitCode = 0
	otherLine, _, _, err := Encode(&other)
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(termination), `"exitCode":1`, `"exitCode":0`, 1)
	cases := []struct {
		name    string
		msg     string
		log     []byte
		logErr  error
		wantErr bool
	}{
		{name: "matching log", msg: string(termination), log: line},
		{name: "log unreadable", msg: string(termination), logErr: errors.New("pod gone"), wantErr: true},
		{name: "log from another run", msg: string(termination), log: otherLine, wantErr: true},
		{name: "summary disagrees with log", msg: forged, log: line, wantErr: true},
		{name: "no termination message", msg: "", log: line, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadResult(tc.msg, func() ([]byte, error) { return tc.log, tc.logErr })
			if (err != nil) != tc.wantErr {
				t.Fatalf("ReadResult = %+v, %v", got, err)
			}
			if err == nil && !reflect.DeepEqual(got, big) {
				t.Errorf("ReadResult returned a different result")
			}
		})
	}
}

func TestReportWriteErrors(t *testing.T) {
	res := &Result{ExitCode: 0, Stdout: "ok"}
	var log bytes.Buffer
	err := Report(res, &log, filepath.Join(t.TempDir(), "missing", "file"))
	if err == nil {
		t.Fatal("Report succeeded writing into a missing directory")
	}
	if got, perr := ParseLog(log.Bytes(), ""); perr != nil || got.Stdout != "ok" {
		t.Errorf("the log line must still be written: %v", perr)
	}
}
