//go:build linux

package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// denyTouch is a deny list that a person approved: everything runs but
// touch, so whatever stops touch is the exec supervision.
var denyTouch = PolicySnapshot{
	DefaultAction: policy.Always,
	Rules:         []SnapshotRule{{Pattern: "touch *", Action: policy.Never}},
	Approved:      true,
}

// supervised runs line in a fresh folder under snap and returns the
// result and the folder.
func supervised(t *testing.T, snap PolicySnapshot, line string, execDirs ...string) (*Result, string) {
	t.Helper()
	dir := t.TempDir()
	res := hostRun(Options{Command: line, Policy: snap.Encode(), Dir: dir, ExecDirs: execDirs,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"}})
	return res, dir
}

// wantRefusedChild checks that a run was refused at a program's exec: exit
// 126, one refusal line naming the program and what started it, and the
// payload file never written.
func wantRefusedChild(t *testing.T, res *Result, dir, child, startedBy string) {
	t.Helper()
	if res.ExitCode != ExitCannotExecute {
		t.Fatalf("exit %d, want %d; stderr %q", res.ExitCode, ExitCannotExecute, res.Stderr)
	}
	if !strings.HasPrefix(res.Error, RefusalPrefix) || !strings.Contains(res.Error, child) || !strings.Contains(res.Error, "started by "+startedBy) {
		t.Errorf("refusal %q does not name %q started by %s", res.Error, child, startedBy)
	}
	if RefusalIn(res.Stderr) != res.Error {
		t.Errorf("the refusal is not stderr's last refusal line: %q", res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "p")); err == nil {
		t.Errorf("the payload ran: %s/p exists", dir)
	}
}

// Findings of the review of 849ea57: each program a program started ran
// unjudged.

func TestSupervision_AwkSystemIsJudged(t *testing.T) {
	res, dir := supervised(t, denyTouch, `awk 'BEGIN { system("touch p") }'`)
	wantRefusedChild(t, res, dir, "touch p", `"awk"`)
}

func TestSupervision_SedExecuteIsJudged(t *testing.T) {
	res, dir := supervised(t, denyTouch, `echo x | sed -n '1e touch p'`)
	wantRefusedChild(t, res, dir, "touch p", `"sed"`)
}

// The judge reads find -exec and xargs; what their command strings turn
// into at run time only the supervision sees.
func TestSupervision_FindExecIsJudged(t *testing.T) {
	res, dir := supervised(t, denyTouch, `T='touch p' find . -maxdepth 0 -exec sh -c '$T' \;`)
	wantRefusedChild(t, res, dir, "touch p", `"sh"`)
}

func TestSupervision_XargsIsJudged(t *testing.T) {
	res, dir := supervised(t, denyTouch, `echo 'touch p' | xargs -I{} sh -c '{}'`)
	wantRefusedChild(t, res, dir, "touch p", `"xargs"`)
}

func TestSupervision_MakeRecipeIsJudged(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte("all:\n\ttouch p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := hostRun(Options{Command: "make -s", Policy: denyTouch.Encode(), Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}})
	wantRefusedChild(t, res, dir, "touch p", `"make"`)
}

func TestSupervision_RenamedCopyNeverRuns(t *testing.T) {
	res, dir := supervised(t, denyTouch, `cp /usr/bin/touch ./t && ./t p`)
	if res.ExitCode != ExitCannotExecute || !strings.Contains(res.Error, "created or changed during the run") {
		t.Fatalf("a copy made during the run ran: exit %d, %q", res.ExitCode, res.Error)
	}
	if _, err := os.Stat(filepath.Join(dir, "p")); err == nil {
		t.Error("the copy ran")
	}
}

func TestSupervision_SymlinkIsJudgedAsItsTarget(t *testing.T) {
	res, dir := supervised(t, denyTouch, `ln -s /usr/bin/touch ./t && ./t p`)
	wantRefusedChild(t, res, dir, "./t p", "the command line")
	if !strings.Contains(res.Error, `"touch p" matched rules[0]`) {
		t.Errorf("not judged as touch: %q", res.Error)
	}
}

func TestSupervision_ProgramsOnWritableFileSystemsDoNotRun(t *testing.T) {
	bin := t.TempDir()
	data, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "true"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	settled(t, filepath.Join(bin, "true"))
	res, _ := supervised(t, denyTouch, bin+"/true")
	if res.ExitCode != ExitCannotExecute || !strings.Contains(res.Error, "writable file system") {
		t.Fatalf("a program on a writable file system ran: exit %d, %q", res.ExitCode, res.Error)
	}
	if res, _ := supervised(t, denyTouch, bin+"/true", bin); res.ExitCode != 0 {
		t.Fatalf("a program from an --exec-dir did not run: exit %d, %q", res.ExitCode, res.Error)
	}
}

// A script that a rule allows runs its programs judged, unless the rule
// trusts them.
func TestSupervision_ScriptChildren(t *testing.T) {
	bin := t.TempDir()
	script := filepath.Join(bin, "snap.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch \"$1\"\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	settled(t, script)
	for _, tc := range []struct {
		children string
		wantExit int
	}{
		{children: "", wantExit: ExitCannotExecute},
		{children: ChildrenJudged, wantExit: ExitCannotExecute},
		{children: ChildrenTrusted, wantExit: 0},
	} {
		snap := PolicySnapshot{DefaultAction: policy.Ask, Rules: []SnapshotRule{
			{Pattern: script + " *", Action: policy.Always, Children: tc.children},
			{Pattern: "snap.sh *", Action: policy.Always, Children: tc.children},
			{Pattern: "touch *", Action: policy.Never},
		}}
		res, dir := supervised(t, snap, script+" p", bin)
		if res.ExitCode != tc.wantExit {
			t.Errorf("children %q: exit %d, want %d (%q)", tc.children, res.ExitCode, tc.wantExit, res.Error)
		}
		_, err := os.Stat(filepath.Join(dir, "p"))
		if ran := err == nil; ran != (tc.wantExit == 0) {
			t.Errorf("children %q: the script's touch ran: %t", tc.children, ran)
		}
	}
}

// busybox runs its applets in-process, without an exec the supervision
// could judge: a script it runs is judged by its text at the shell's exec.
func TestSupervision_BusyboxScriptIsJudgedByItsText(t *testing.T) {
	bin := t.TempDir()
	script := filepath.Join(bin, "snap.sh")
	if err := os.WriteFile(script, []byte("#!/usr/bin/busybox sh\necho start\ntouch p\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	settled(t, script)
	snap := PolicySnapshot{DefaultAction: policy.Ask, Rules: []SnapshotRule{
		{Pattern: script, Action: policy.Always},
		{Pattern: "snap.sh", Action: policy.Always},
		{Pattern: "echo *", Action: policy.Always},
		{Pattern: "touch *", Action: policy.Never},
	}}
	res, dir := supervised(t, snap, script, bin)
	wantRefusedChild(t, res, dir, script, "the command line")
	if !strings.Contains(res.Error, `"touch p" matched rules[3]`) {
		t.Errorf("not judged by its text: %q", res.Error)
	}

	// A rule that trusts the script's children lets its text go unread.
	snap.Rules[0].Children, snap.Rules[1].Children = ChildrenTrusted, ChildrenTrusted
	res, dir = supervised(t, snap, script, bin)
	if res.ExitCode != 0 || res.Stdout != "start\n" {
		t.Fatalf("a trusted script did not run: exit %d, %q", res.ExitCode, res.Error)
	}
	if _, err := os.Stat(filepath.Join(dir, "p")); err != nil {
		t.Errorf("the trusted script's touch did not run: %v", err)
	}
}

// A script's interpreter opens it again by its path: a path through a
// link the command could change might name another file by then.
func TestSupervision_ScriptThroughAWritableLinkDoesNotRun(t *testing.T) {
	bin, links := t.TempDir(), t.TempDir()
	script := filepath.Join(bin, "snap.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(links, "scripts")); err != nil {
		t.Fatal(err)
	}
	settled(t, script)
	settled(t, links)
	linked := filepath.Join(links, "scripts", "snap.sh")
	snap := PolicySnapshot{DefaultAction: policy.Always}
	res, _ := supervised(t, snap, linked, bin)
	if res.ExitCode != ExitCannotExecute || !strings.Contains(res.Error, "reached through the link") {
		t.Fatalf("a script behind a writable link ran: exit %d, %q, stdout %q", res.ExitCode, res.Error, res.Stdout)
	}
	if res, _ := supervised(t, snap, script, bin); res.ExitCode != 0 || res.Stdout != "ran\n" {
		t.Fatalf("the script by its own path did not run: exit %d, %q", res.ExitCode, res.Error)
	}
}

// A process whose first stop is seen before its parent's fork event must
// not exec before that event says it descends from a trusted program:
// many short pipelines in a trusted script make that order likely.
func TestSupervision_TrustReachesEveryChild(t *testing.T) {
	bin := t.TempDir()
	script := filepath.Join(bin, "many.sh")
	body := "#!/bin/sh\ni=0\nwhile [ $i -lt 150 ]; do /bin/true | /bin/true; i=$((i+1)); done\necho done\n"
	if err := os.WriteFile(script, []byte(body), 0o555); err != nil {
		t.Fatal(err)
	}
	settled(t, script)
	snap := PolicySnapshot{DefaultAction: policy.Never, Rules: []SnapshotRule{
		{Pattern: script, Action: policy.Always, Children: ChildrenTrusted},
		{Pattern: "many.sh", Action: policy.Always, Children: ChildrenTrusted},
	}}
	res, _ := supervised(t, snap, script, bin)
	if res.ExitCode != 0 || res.Stdout != "done\n" {
		t.Fatalf("a trusted script's child was judged: exit %d, %q", res.ExitCode, res.Error)
	}
}

// TestSupervision_EndsBesideOtherChildrenOfItsThread: a process that runs
// commands among other work (the operator's tests run warm runners in
// their own process) may have started children on the thread that becomes
// a supervisor. Those outlive the command, and the run still ends with it.
func TestSupervision_EndsBesideOtherChildrenOfItsThread(t *testing.T) {
	// Give many threads of the process a child that lives on: each
	// goroutine holds a thread of its own while it starts one, then lets
	// the thread serve others.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		children []*exec.Cmd
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cmd := exec.Command("sleep", "600")
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			children = append(children, cmd)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range children {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	for i := range 8 {
		done := make(chan *Result, 1)
		go func() { res, _ := supervised(t, denyTouch, "echo ended"); done <- res }()
		select {
		case res := <-done:
			if res.ExitCode != 0 || res.Stdout != "ended\n" {
				t.Fatalf("run %d: exit %d, stdout %q, error %q", i, res.ExitCode, res.Stdout, res.Error)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d did not end within 30s beside %d other children of the process", i, len(children))
		}
	}
}
