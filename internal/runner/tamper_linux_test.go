//go:build linux

package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tamperHelper, as the test binary's first argument, makes it one of the
// programs of the tests below (tamperHelperMain).
const tamperHelper = "tamper-helper"

func init() {
	if len(os.Args) > 2 && os.Args[1] == tamperHelper {
		os.Exit(tamperHelperMain(os.Args[2], os.Args[3:]))
	}
}

// tamperCanary is memory of the runner that a process of the tree could
// overwrite if it could reach the runner.
var tamperCanary = [16]byte{'k', 'u', 'b', 'e', 's', 'k', 'i', 'l', 'l', 's', '-', 'i', 'n', 't', 'a', 'c'}

// tampered is what a process of the tree writes over tamperCanary.
var tampered = []byte("TAMPERED-BY-TREE")

// attacks are the ways a process of the tree tries to reach the runner,
// in the order the runner's command tries them, and what each must get.
var attacks = []struct{ how, want string }{
	{"seize", "EPERM"},    // the filter
	{"attach", "EPERM"},   // the filter
	{"vm-write", "EPERM"}, // the filter
	{"vm-read", "EPERM"},  // the filter
	{"mem", "EACCES"},     // the runner is not dumpable
	{"fd", "EACCES"},      // the runner is not dumpable
	{"getfd", "EPERM"},    // the runner is not dumpable
}

// tamperHelperMain runs "runner.test tamper-helper HOW ARGS...":
//
//	runner DIR          Run, as an unprivileged runner would, a command that
//	                    tries every attack on it, with DIR's programs
//	                    allowed to run; print a tamperReport as JSON
//	seize PID ADDR      PTRACE_SEIZE PID
//	attach PID ADDR     PTRACE_ATTACH PID
//	vm-write PID ADDR   process_vm_writev tampered to ADDR in PID
//	vm-read PID ADDR    process_vm_readv from ADDR in PID
//	mem PID ADDR        open /proc/PID/mem for writing, write tampered to ADDR
//	fd PID ADDR         list /proc/PID/fd
//	getfd PID ADDR      pidfd_getfd PID's stderr
//	dumpable            print PR_GET_DUMPABLE of this process
//	probe               the calls the filter refuses, aimed where they
//	                    succeed (or fail otherwise) without it
//	by-hand-probe       probe under abiFilter for this machine's own ABI
//
// An attack prints "HOW: ok" when it reached the runner, else "HOW: ERRNO".
func tamperHelperMain(how string, args []string) int {
	switch how {
	case "runner":
		return tamperRunner(args[0])
	case "probe":
		return filterProbe()
	case "dumpable":
		d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
		if err != nil {
			fmt.Printf("dumpable: %s\n", errnoOrOK(err))
			return 0
		}
		fmt.Printf("dumpable: %d\n", d)
		return 0
	case "by-hand-probe":
		runtime.LockOSThread()
		if err := loadByHand(); err != nil {
			fmt.Println(err)
			return 1
		}
		return filterProbe()
	}
	if len(args) != 2 {
		fmt.Printf("%s: want PID ADDR\n", how)
		return 1
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	addr, err := strconv.ParseUint(args[1], 0, 64)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("%s: %s\n", how, errnoOrOK(attack(how, pid, uintptr(addr))))
	return 0
}

// attack tries one way to reach process pid, whose tamperCanary is at
// addr.
func attack(how string, pid int, addr uintptr) error {
	remote := []unix.RemoteIovec{{Base: addr, Len: len(tampered)}}
	switch how {
	case "seize":
		// Leaving detaches: the runner goes on as before.
		return unix.PtraceSeize(pid)
	case "attach":
		if err := unix.PtraceAttach(pid); err != nil {
			return err
		}
		// The SIGSTOP of the attach stopped the runner's other threads.
		return unix.Kill(pid, unix.SIGCONT)
	case "vm-write":
		_, err := unix.ProcessVMWritev(pid, []unix.Iovec{iovec(tampered)}, remote, 0)
		return err
	case "vm-read":
		buf := make([]byte, len(tampered))
		_, err := unix.ProcessVMReadv(pid, []unix.Iovec{iovec(buf)}, remote, 0)
		return err
	case "mem":
		f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/mem", os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = f.WriteAt(tampered, int64(addr))
		return err
	case "fd":
		_, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		return err
	case "getfd":
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return err
		}
		defer func() { _ = unix.Close(pidfd) }()
		fd, err := unix.PidfdGetfd(pidfd, 2, 0)
		if err == nil {
			_ = unix.Close(fd)
		}
		return err
	}
	return fmt.Errorf("unknown attack %q", how)
}

func iovec(b []byte) unix.Iovec {
	v := unix.Iovec{Base: &b[0]}
	v.SetLen(len(b))
	return v
}

// errnoOrOK is "ok" for no error, else the errno's name.
func errnoOrOK(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// filterProbe makes the calls the filter refuses where, without it, they
// reach no one else: PTRACE_ATTACH and PTRACE_SEIZE of a process that
// does not exist (ESRCH), and process_vm_readv and process_vm_writev of
// this very process (ok).
func filterProbe() int {
	const noSuchPID = 1 << 30 // over PID_MAX_LIMIT
	// Memory this process writes (the compiler lays a []byte it never
	// writes over the string's read-only bytes).
	own := make([]byte, 10)
	copy(own, "own memory")
	buf := make([]byte, len(own))
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&own[0])), Len: len(own)}}
	_, readErr := unix.ProcessVMReadv(os.Getpid(), []unix.Iovec{iovec(buf)}, remote, 0)
	_, writeErr := unix.ProcessVMWritev(os.Getpid(), []unix.Iovec{iovec(buf)}, remote, 0)
	fmt.Printf("attach: %s\nseize: %s\nvm-read: %s\nvm-write: %s\n", errnoOrOK(unix.PtraceAttach(noSuchPID)),
		errnoOrOK(unix.PtraceSeize(noSuchPID)), errnoOrOK(readErr), errnoOrOK(writeErr))
	runtime.KeepAlive(own)
	return 0
}

// tamperReport is what "tamper-helper runner" found.
type tamperReport struct {
	// DumpableBefore and DumpableAfter are PR_GET_DUMPABLE before Run and
	// after it. (A test process that started a program with other
	// credentials is no longer dumpable: os/exec's child shares its
	// memory until exec, and the kernel marks it when the child's
	// credentials change. This one started none.)
	DumpableBefore, DumpableAfter int
	// ExitCode, Stdout and Error are the result of the attacking command.
	ExitCode      int
	Stdout, Error string
	// Canary is tamperCanary after the command ran.
	Canary string
	// SelfReads is the first of the runner's reads of its own /proc/self
	// that failed after Run, if any.
	SelfReads string
	// Again is the exit code of a second run in the same process.
	Again int
}

// tamperRunner runs, with this process as the runner, a command whose
// programs try every attack on it, and prints what came of it. It runs
// from init, where the main goroutine holds the main thread: the
// supervisor gets another, which an attach that stops the main thread
// (before the runner was shielded) does not hold up for good.
func tamperRunner(execDir string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	pid, addr := strconv.Itoa(os.Getpid()), fmt.Sprintf("%#x", uintptr(unsafe.Pointer(&tamperCanary[0])))
	var lines []string
	for _, a := range attacks {
		lines = append(lines, strings.Join([]string{exe, tamperHelper, a.how, pid, addr}, " "))
	}
	// Programs the runner starts are dumpable again after their exec.
	lines = append(lines, exe+" "+tamperHelper+" dumpable")
	dir, err := os.Getwd()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	o := Options{Command: strings.Join(lines, "; "), Policy: approvedAll, Dir: dir,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"}}
	o.ExecDirs = append([]string{execDir}, hostExecDirs...)
	var rep tamperReport
	rep.DumpableBefore, _ = unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	res := Run(o)
	rep.DumpableAfter, _ = unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	rep.ExitCode, rep.Stdout, rep.Error = res.ExitCode, res.Stdout, res.Error
	rep.Canary = string(tamperCanary[:])
	if err := readSelf(); err != nil {
		rep.SelfReads = err.Error()
	}
	o.Command = "/bin/true"
	rep.Again = Run(o).ExitCode
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	return 0
}

// readSelf reads what a Go program, and the runner, read of their own
// process in /proc.
func readSelf() error {
	if _, err := os.Readlink("/proc/self/exe"); err != nil {
		return err
	}
	if _, err := os.Executable(); err != nil {
		return err
	}
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		return err
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, f := range []string{"/proc/self/status", "/proc/self/cgroup", "/proc/self/mountinfo",
		"/proc/self/task/" + tasks[0].Name() + "/status"} {
		if _, err := os.ReadFile(f); err != nil {
			return err
		}
	}
	return nil
}

// unprivilegedRunner returns how to start the test binary as a runner
// that holds no capabilities, as in a sandbox: a process of the tree then
// runs as the same user with the same (no) privileges, and only the
// runner's own defenses keep it away. Run as root, the binary is copied
// where the user nobody can run it, and runs as nobody in a folder of
// its own.
func unprivilegedRunner(t *testing.T, exe string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		cmd := exec.Command(exe, tamperHelper, "runner", filepath.Dir(exe))
		cmd.Dir = t.TempDir()
		return cmd
	}
	const nobody = 65534
	base := t.TempDir()
	for d := base; d != "/"; d = filepath.Dir(d) {
		if d == base || d == filepath.Dir(base) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if st, err := os.Stat(d); err != nil || st.Mode().Perm()&0o001 == 0 {
			t.Fatalf("nobody cannot reach %s, the test's temporary folder: set TMPDIR to a folder every user may enter", base)
		}
	}
	bin, work := filepath.Join(base, "bin"), filepath.Join(base, "work")
	for _, d := range []string{bin, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(work, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(bin, filepath.Base(exe))
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := os.OpenFile(copied, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	settled(t, copied)
	cmd := exec.Command(copied, tamperHelper, "runner", bin)
	cmd.Dir = work
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// A process of the supervised tree runs as the runner's user. It must
// not be able to trace the runner, read or write its memory or take its
// files, which would let it change what the runner judges or reports.
func TestSupervision_TreeCannotReachTheRunner(t *testing.T) {
	exe, _ := helperExe(t)
	cmd := unprivilegedRunner(t, exe)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the runner: %v; stdout %q, stderr %q", err, stdout.String(), stderr.String())
		}
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		err := <-done
		t.Fatalf("the runner did not finish (%v): a process of the tree stopped it; stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	var rep tamperReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the runner's report %q: %v; stderr %q", stdout.String(), err, stderr.String())
	}

	var want strings.Builder
	for _, a := range attacks {
		want.WriteString(a.how + ": " + a.want + "\n")
	}
	want.WriteString("dumpable: 1\n")
	if rep.ExitCode != 0 || rep.Stdout != want.String() {
		t.Errorf("exit %d, error %q, attacks:\n%s\nwant exit 0 and:\n%s", rep.ExitCode, rep.Error, rep.Stdout, want.String())
	}
	if rep.Canary != string(tamperCanary[:]) {
		t.Errorf("the runner's memory was changed by the tree: %q", rep.Canary)
	}
	if rep.DumpableBefore != 1 || rep.DumpableAfter != 0 {
		t.Errorf("PR_GET_DUMPABLE %d before Run and %d after, want 1 and 0", rep.DumpableBefore, rep.DumpableAfter)
	}
	if rep.SelfReads != "" {
		t.Errorf("the runner cannot read its own /proc/self: %s", rep.SelfReads)
	}
	if rep.Again != 0 {
		t.Errorf("a second run in the same runner: exit %d", rep.Again)
	}
}

// The filter refuses PTRACE_ATTACH, PTRACE_SEIZE, process_vm_readv and
// process_vm_writev wherever they are aimed: without it the same calls fail otherwise
// (ESRCH) or succeed.
func TestSupervision_TreeCannotTrace(t *testing.T) {
	exe, exeDir := helperExe(t)
	out, err := exec.Command(exe, tamperHelper, "probe").Output()
	if want := "attach: ESRCH\nseize: ESRCH\nvm-read: ok\nvm-write: ok\n"; err != nil || string(out) != want {
		t.Fatalf("unsupervised: %q, %v; want %q", out, err, want)
	}
	const refused = "attach: EPERM\nseize: EPERM\nvm-read: EPERM\nvm-write: EPERM\n"
	res, _ := supervised(t, denyTouch, exe+" "+tamperHelper+" probe", exeDir)
	if res.ExitCode != 0 || res.Stdout != refused {
		t.Errorf("supervised: exit %d, %q; want 0 and %q; error %q", res.ExitCode, res.Stdout, refused, res.Error)
	}
	// The program written by hand for the 32-bit ABI, built for the
	// native one, refuses them in the kernel too.
	out, err = exec.Command(exe, tamperHelper, "by-hand-probe").Output()
	if err != nil || string(out) != refused {
		t.Errorf("by hand: %q, %v; want %q", out, err, refused)
	}
}
