package runner

import (
	"reflect"
	"testing"
)

// seedResults are results whose encodings seed the fuzz corpora.
var seedResults = []*Result{
	{ExitCode: 0, Stdout: "ok\n"},
	{ExitCode: 124, TimedOut: true, Stderr: "slow", DurationMillis: 30000},
	{ExitCode: 1, Stdout: string(make([]byte, 5000)), StdoutTruncated: true, StdoutBytes: 9000},
	{ExitCode: 127, Error: "failed to start /bin/sh: no such file"},
}

func FuzzParseTerminationMessage(f *testing.F) {
	for _, r := range seedResults {
		_, termination, _, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(termination))
	}
	f.Add(`{"exitCode":0,"inLog":true,"sha256":"` + payloadSHA("x") + `"}`)
	f.Add("")
	f.Add("{")
	f.Fuzz(func(t *testing.T, msg string) {
		r, needLog, err := ParseTerminationMessage(msg)
		if err != nil {
			return
		}
		if needLog != (r.LogSHA256 != "") {
			t.Fatalf("needLog %t with LogSHA256 %q", needLog, r.LogSHA256)
		}
		if needLog {
			return
		}
		// A full result accepted once is accepted again after re-encoding.
		_, termination, _, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(termination) <= MaxTerminationMessageBytes {
			if _, _, err := ParseTerminationMessage(string(termination)); err != nil {
				t.Fatalf("re-encoded message rejected: %v", err)
			}
		}
	})
}

func FuzzParseLog(f *testing.F) {
	for _, r := range seedResults {
		line, _, sha, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(line, sha)
		f.Add(append([]byte("noise\n"), line...), "")
	}
	f.Add([]byte(LogPrefix+"H4sI\n"), "")
	f.Add([]byte(nil), "")
	f.Fuzz(func(t *testing.T, log []byte, sha string) {
		r, err := ParseLog(log, sha)
		if err != nil {
			return
		}
		// Whatever was accepted survives a round trip unchanged.
		line, _, gotSHA, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseLog(line, gotSHA)
		if err != nil {
			t.Fatalf("re-encoded result rejected: %v", err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip changed the result: %+v != %+v", back, r)
		}
	})
}
