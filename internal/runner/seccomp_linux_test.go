//go:build linux

package runner

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/onsi/gomega"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// cloneHelper, as the test binary's first argument, makes it a program
// that starts another in a chosen way (cloneHelperMain): the tests run it
// as a program of a command, under the supervision.
const cloneHelper = "clone-helper"

func init() {
	if len(os.Args) > 2 && os.Args[1] == cloneHelper {
		os.Exit(cloneHelperMain(os.Args[2], os.Args[3:]))
	}
}

// cloneArgs is struct clone_args up to CLONE_ARGS_SIZE_VER0.
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls uint64
}

// cloneHelperMain runs "runner.test clone-helper HOW ARGS...":
//
//	untraced PROGRAM ARGS...  clone(CLONE_UNTRACED|SIGCHLD), then execve in the child
//	traced PROGRAM ARGS...    clone(SIGCHLD), then execve in the child
//	clone3 PROGRAM ARGS...    clone3 with CLONE_UNTRACED, then execve in the child
//	exec PROGRAM ARGS...      os/exec, as any Go program starts another
//	by-hand HOW ARGS...       HOW under abiFilter for this machine's own ABI
//	no-seccomp DIR            Run "touch p" in DIR where seccomp(2) fails
//
// It prints "HOW: ran" once the child ended, or "HOW: ERRNO" and exits 3
// when the call failed.
func cloneHelperMain(how string, args []string) int {
	switch how {
	case "exec":
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Printf("exec: %v\n", err)
			return 3
		}
		fmt.Println("exec: ran")
		return 0
	case "no-seccomp":
		return runWithoutSeccomp(args[0])
	}
	runtime.LockOSThread()
	if how == "by-hand" {
		if err := loadByHand(); err != nil {
			fmt.Println(err)
			return 1
		}
		how, args = args[0], args[1:]
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		return 1
	}
	argv, err := syscall.SlicePtrFromStrings(args)
	if err != nil {
		return 1
	}
	envv, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return 1
	}
	var pid uintptr
	var errno syscall.Errno
	switch how {
	case "untraced":
		pid, _, errno = syscall.RawSyscall(syscall.SYS_CLONE, syscall.CLONE_UNTRACED|uintptr(syscall.SIGCHLD), 0, 0)
	case "traced":
		pid, _, errno = syscall.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0)
	case "clone3":
		ca := cloneArgs{flags: syscall.CLONE_UNTRACED, exitSignal: uint64(syscall.SIGCHLD)}
		pid, _, errno = syscall.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&ca)), unsafe.Sizeof(ca), 0)
	default:
		fmt.Printf("unknown helper %q\n", how)
		return 1
	}
	if errno != 0 {
		fmt.Printf("%s: %s\n", how, unix.ErrnoName(errno))
		return 3
	}
	if pid == 0 {
		// The child holds a copy of this thread alone: raw system calls only.
		_, _, _ = syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(pathp)),
			uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
		_, _, _ = syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 127, 0, 0)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(int(pid), &ws, 0, nil); err != nil {
		fmt.Printf("%s: wait: %v\n", how, err)
		return 1
	}
	fmt.Printf("%s: ran\n", how)
	return 0
}

// loadByHand installs on this thread the program written for the 32-bit
// ABI, built for the native one: the kernel then runs it on the calls of
// this very process, which the test binary cannot make in a 32-bit ABI.
func loadByHand() error {
	native, err := arch.GetInfo("")
	if err != nil {
		return err
	}
	prog, err := abiFilter(native)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	return loadFilter(prog)
}

// runWithoutSeccomp makes seccomp(2) fail in this whole process, as in a
// kernel built without it, then runs "touch p" in dir and prints the
// result's exit code and error.
func runWithoutSeccomp(dir string) int {
	err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls:      []seccomp.SyscallGroup{{Names: []string{"seccomp"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)}},
	}})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	res := hostRun(Options{Command: "touch p", Policy: approvedAll, Dir: dir})
	fmt.Printf("%d\n%s\n", res.ExitCode, res.Error)
	return 0
}

// helperExe returns the test binary, old enough to run, and the folder
// programs may run from for it.
func helperExe(t *testing.T) (string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	settled(t, exe)
	return exe, filepath.Dir(exe)
}

// wantBlocked checks that a clone the supervision could not follow failed
// with errno and that the program it would have run never ran.
func wantBlocked(t *testing.T, res *Result, dir, how, errno string) {
	t.Helper()
	if res.ExitCode != 3 || res.Stdout != how+": "+errno+"\n" {
		t.Errorf("%s: exit %d, stdout %q, want 3 and %q; error %q, stderr %q", how, res.ExitCode, res.Stdout, how+": "+errno+"\n", res.Error, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "p")); err == nil {
		t.Errorf("%s: the child's touch ran unjudged: %s/p exists", how, dir)
	}
}

// A clone with CLONE_UNTRACED would make a child ptrace does not follow,
// whose programs nobody judges: it fails.
func TestSupervision_UntracedCloneFails(t *testing.T) {
	exe, exeDir := helperExe(t)
	res, dir := supervised(t, denyTouch, exe+" "+cloneHelper+" untraced touch p", exeDir)
	wantBlocked(t, res, dir, "untraced", "EPERM")

	// The same clone without the flag works, and its child is judged.
	res, dir = supervised(t, denyTouch, exe+" "+cloneHelper+" traced touch p", exeDir)
	wantRefusedChild(t, res, dir, "touch p", strconv.Quote(filepath.Base(exe)))
}

// clone3's flags live in memory a seccomp filter cannot read: it fails as
// on a kernel without it, so callers fall back to clone.
func TestSupervision_Clone3IsNotThere(t *testing.T) {
	exe, exeDir := helperExe(t)
	res, dir := supervised(t, denyTouch, exe+" "+cloneHelper+" clone3 touch p", exeDir)
	wantBlocked(t, res, dir, "clone3", "ENOSYS")
}

// The program written by hand for the 32-bit ABI does in the kernel what
// it does in TestTreeFilters_EveryABI: built for the native ABI, it
// refuses the same calls there.
func TestTreeFilters_ByHandInTheKernel(t *testing.T) {
	exe, _ := helperExe(t)
	for _, tc := range []struct{ how, want string }{
		{"untraced", "untraced: EPERM\n"},
		{"clone3", "clone3: ENOSYS\n"},
		{"traced", "traced: ran\n"},
	} {
		dir := t.TempDir()
		cmd := exec.Command(exe, cloneHelper, "by-hand", tc.how, "touch", "p")
		cmd.Dir = dir
		out, _ := cmd.Output()
		if string(out) != tc.want {
			t.Errorf("%s: %q, want %q", tc.how, out, tc.want)
		}
		_, err := os.Stat(filepath.Join(dir, "p"))
		if ran := err == nil; ran != (tc.how == "traced") {
			t.Errorf("%s: the child ran: %t", tc.how, ran)
		}
	}
}

// onTestPath reports whether a program is in the PATH supervised gives.
func onTestPath(name string) bool {
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return true
		}
	}
	return false
}

// Ordinary commands still run under the filter, and what they start is
// still judged.
func TestSupervision_ClonesThatStillWork(t *testing.T) {
	exe, exeDir := helperExe(t)
	goName := strconv.Quote(filepath.Base(exe))
	cases := []struct {
		name, line, stdout string
		// startedBy, when set, is what started the touch that the
		// supervision must refuse.
		startedBy string
		python    bool
	}{
		{name: "filter in place", line: `grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status`, stdout: "NoNewPrivs:\t1\nSeccomp:\t2\n"},
		{name: "pipeline", line: `printf 'b\na\n' | sort | head -n 1`, stdout: "a\n"},
		{name: "sh -c", line: `sh -c 'echo one; /bin/echo two'`, stdout: "one\ntwo\n"},
		{name: "background job", line: `/bin/echo bg & wait; echo done`, stdout: "bg\ndone\n"},
		{name: "background job in sh", line: `sh -c '(sleep 0.05; /bin/echo late) & /bin/echo early; wait'`, stdout: "early\nlate\n"},
		{name: "go program", line: exe + " " + cloneHelper + " exec /bin/echo go", stdout: "go\nexec: ran\n"},
		{name: "python threads and subprocess", python: true,
			line:   `python3 -c 'import subprocess, threading; t = threading.Thread(target=lambda: print("thread", flush=True)); t.start(); t.join(); subprocess.run(["echo", "child"])'`,
			stdout: "thread\nchild\n"},
		{name: "sh -c judged", line: `T='touch p' sh -c '$T'`, startedBy: `"sh"`},
		{name: "background job judged", line: `T='touch p' sh -c '$T & wait'`, startedBy: `"sh"`},
		{name: "go program judged", line: exe + " " + cloneHelper + " exec touch p", startedBy: goName},
		{name: "python judged", python: true, line: `python3 -c 'import subprocess; subprocess.run(["touch", "p"])'`, startedBy: `"python3"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.python && !onTestPath("python3") {
				t.Fatal("python3 is missing: make test-tools installs it")
			}
			res, dir := supervised(t, denyTouch, tc.line, exeDir)
			if tc.startedBy != "" {
				wantRefusedChild(t, res, dir, "touch p", tc.startedBy)
				return
			}
			if res.ExitCode != 0 || res.Stdout != tc.stdout {
				t.Errorf("exit %d, stdout %q, want 0 and %q; error %q, stderr %q", res.ExitCode, res.Stdout, tc.stdout, res.Error, res.Stderr)
			}
		})
	}
}

// Where no filter can be installed, the command does not run.
func TestSupervision_NoSeccompNoRun(t *testing.T) {
	exe, _ := helperExe(t)
	dir := t.TempDir()
	out, err := exec.Command(exe, cloneHelper, "no-seccomp", dir).Output()
	if err != nil {
		t.Fatalf("helper: %v, %q", err, out)
	}
	code, msg, _ := strings.Cut(strings.TrimSuffix(string(out), "\n"), "\n")
	if code != strconv.Itoa(ExitRunnerFailure) || !strings.Contains(msg, "seccomp") || !strings.Contains(msg, "never runs a command unsupervised") {
		t.Errorf("exit %s, error %q; want %d and a message that names seccomp", code, msg, ExitRunnerFailure)
	}
	if _, err := os.Stat(filepath.Join(dir, "p")); err == nil {
		t.Error("the command ran without the filter")
	}
}

// seccompData is the struct seccomp_data a filter reads, for x/net/bpf's
// VM. The VM loads words big-endian and the kernel in the machine's
// (little-endian) order, so each 32-bit word is written big-endian with
// the value the kernel would load there: args[0]'s low half first.
func seccompData(nr, auditArch uint32, arg0 uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], auditArch)
	binary.BigEndian.PutUint32(b[16:], uint32(arg0))
	binary.BigEndian.PutUint32(b[20:], uint32(arg0>>32))
	return b
}

// The filters' answer for every ABI a process of this machine can call,
// including those no test program here can reach (a 32-bit ABI, x32).
func TestTreeFilters_EveryABI(t *testing.T) {
	progs, err := treeFilters()
	if err != nil {
		t.Fatal(err)
	}
	var vms []*bpf.VM
	for _, p := range progs {
		vm, err := bpf.NewVM(p)
		if err != nil {
			t.Fatal(err)
		}
		vms = append(vms, vm)
	}
	// verdict is the kernel's answer: a filter that does not allow the
	// call decides (here no two filters refuse the same call).
	verdict := func(nr, auditArch uint32, arg0 uint64) uint32 {
		v := uint32(seccompAllow)
		for _, vm := range vms {
			out, err := vm.Run(seccompData(nr, auditArch, arg0))
			if err != nil {
				t.Fatal(err)
			}
			if uint32(out) != seccompAllow {
				v = uint32(out)
			}
		}
		return v
	}
	native, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	compat, err := compatABI()
	if err != nil {
		t.Fatal(err)
	}
	const (
		untraced   = syscall.CLONE_UNTRACED | uint64(syscall.SIGCHLD)
		fork       = uint64(syscall.SIGCHLD)
		goThread   = syscall.CLONE_VM | syscall.CLONE_FS | syscall.CLONE_FILES | syscall.CLONE_SIGHAND | syscall.CLONE_SYSVSEM | syscall.CLONE_THREAD
		goStartVM  = syscall.CLONE_VFORK | syscall.CLONE_VM | unix.CLONE_PIDFD | uint64(syscall.SIGCHLD)
		highBits   = 0xffffffff00000000
		x32Bit     = 0x40000000
		notTheFlag = ^uint64(syscall.CLONE_UNTRACED)
	)
	nr := func(abi *arch.Info, name string) uint32 {
		n, ok := abi.SyscallNames[name]
		if !ok {
			t.Fatalf("no %s in %s", name, abi.Name)
		}
		return uint32(n)
	}
	type abiCase struct {
		name string
		nr   uint32
		arch uint32
		arg0 uint64
		want uint32
	}
	cases := []abiCase{}
	for _, abi := range []*arch.Info{native, compat} {
		id := uint32(abi.ID)
		cases = append(cases,
			abiCase{abi.Name + " clone untraced", nr(abi, "clone"), id, untraced, seccompEPERM},
			abiCase{abi.Name + " clone every flag but untraced", nr(abi, "clone"), id, notTheFlag, seccompAllow},
			abiCase{abi.Name + " fork by clone", nr(abi, "clone"), id, fork, seccompAllow},
			abiCase{abi.Name + " thread by clone", nr(abi, "clone"), id, goThread, seccompAllow},
			abiCase{abi.Name + " os/exec's clone", nr(abi, "clone"), id, goStartVM, seccompAllow},
			abiCase{abi.Name + " clone3", nr(abi, "clone3"), id, 0, seccompENOSYS},
			abiCase{abi.Name + " execve", nr(abi, "execve"), id, untraced, seccompAllow},
			abiCase{abi.Name + " ptrace attach", nr(abi, "ptrace"), id, unix.PTRACE_ATTACH, seccompEPERM},
			abiCase{abi.Name + " ptrace seize", nr(abi, "ptrace"), id, unix.PTRACE_SEIZE, seccompEPERM},
			abiCase{abi.Name + " ptrace traceme", nr(abi, "ptrace"), id, unix.PTRACE_TRACEME, seccompAllow},
			abiCase{abi.Name + " ptrace cont", nr(abi, "ptrace"), id, unix.PTRACE_CONT, seccompAllow},
			abiCase{abi.Name + " ptrace setoptions", nr(abi, "ptrace"), id, unix.PTRACE_SETOPTIONS, seccompAllow},
			abiCase{abi.Name + " ptrace geteventmsg", nr(abi, "ptrace"), id, unix.PTRACE_GETEVENTMSG, seccompAllow},
			abiCase{abi.Name + " ptrace pokedata", nr(abi, "ptrace"), id, unix.PTRACE_POKEDATA, seccompAllow},
			abiCase{abi.Name + " process_vm_readv", nr(abi, "process_vm_readv"), id, 0, seccompEPERM},
			abiCase{abi.Name + " process_vm_writev", nr(abi, "process_vm_writev"), id, 0, seccompEPERM},
		)
	}
	cases = append(cases,
		abiCase{native.Name + " clone untraced, high bits set", nr(native, "clone"), uint32(native.ID), untraced | highBits, seccompEPERM},
		// The other ABI's clone number, called natively, is another call.
		abiCase{native.Name + " call numbered as " + compat.Name + " clone", nr(compat, "clone"), uint32(native.ID), untraced, seccompAllow},
		// A native request is a long: with high bits set it is no attach.
		abiCase{native.Name + " ptrace attach, high bits set", nr(native, "ptrace"), uint32(native.ID), unix.PTRACE_ATTACH | highBits, seccompAllow},
	)
	for _, name := range []string{"ptrace", "process_vm_readv", "process_vm_writev"} {
		if n := nr(compat, name); n != nr(native, name) {
			cases = append(cases, abiCase{native.Name + " call numbered as " + compat.Name + " " + name, n, uint32(native.ID), unix.PTRACE_ATTACH, seccompAllow})
		}
	}
	if runtime.GOARCH == "amd64" {
		cases = append(cases,
			abiCase{"x32 clone", x32Bit | nr(native, "clone"), uint32(native.ID), fork, seccompENOSYS},
			abiCase{"x32 clone3", x32Bit | nr(native, "clone3"), uint32(native.ID), 0, seccompENOSYS},
			abiCase{"x32 process_vm_writev", x32Bit | nr(arch.X32, "process_vm_writev"), uint32(native.ID), 0, seccompENOSYS},
		)
	}
	for _, c := range cases {
		if got := verdict(c.nr, c.arch, c.arg0); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}

// filteredThreads returns the runner's own threads that carry a seccomp
// filter or no_new_privs.
func filteredThreads(t *testing.T) []int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, task := range tasks {
		status, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if (k == "Seccomp_filters" || k == "NoNewPrivs") && strings.TrimSpace(v) != "0" {
				tid, _ := strconv.Atoi(task.Name())
				tids = append(tids, tid)
				break
			}
		}
	}
	return tids
}

// The filter binds the supervised tree, not the runner: once Run
// returns, no thread that runs the runner's code carries it. The
// supervisor's thread ends with its goroutine or, when it was the main
// thread, which the Go runtime never ends, stays parked for good.
func TestSupervision_RunnerStaysUnfiltered(t *testing.T) {
	// The main thread alone: an earlier Run's supervisor, parked.
	if tids := filteredThreads(t); len(tids) != 0 && !slices.Equal(tids, []int{os.Getpid()}) {
		t.Fatalf("this test process already runs filtered or with no_new_privs (threads %v): run it where it starts unfiltered", tids)
	}
	if res := hostRun(Options{Command: "/bin/true", Policy: approvedAll}); res.ExitCode != 0 {
		t.Fatalf("exit %d, %q", res.ExitCode, res.Error)
	}
	gomega.NewWithT(t).Eventually(func() []int { return filteredThreads(t) }, 5*time.Second, 5*time.Millisecond).
		Should(gomega.Or(gomega.BeEmpty(), gomega.Equal([]int{os.Getpid()})), "a thread of the runner kept the filter")
	out, err := exec.Command("grep", "-E", "^(NoNewPrivs|Seccomp):", "/proc/self/status").Output()
	if err != nil || string(out) != "NoNewPrivs:\t0\nSeccomp:\t0\n" {
		t.Errorf("a program the runner started after Run: %q, %v", out, err)
	}
}
