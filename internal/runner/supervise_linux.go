package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// traceOptions make the kernel stop a traced process at every exec, follow
// it into every process and thread it creates, and kill the whole tree if
// the runner itself dies, so nothing ever runs unsupervised.
const traceOptions = unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK |
	unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_EXITKILL

// tracee is what the supervisor keeps of one traced process or thread.
type tracee struct {
	// name is the program it runs now, for refusals: "the command line"
	// for the runner's shell, else the name it was judged as.
	name string
	// trusted is set when a rule with ChildrenTrusted allowed the program
	// (or one it descends from): its execs are not judged by the policy.
	trusted bool
	// fresh is set from its creation until its first stop.
	fresh bool
	// waiting is set for a new process whose first stop came before its
	// parent's event: it stays stopped until that event says what it
	// runs and with what trust, so it cannot exec before.
	waiting bool
}

// supervisor traces the runner's shell and every process it starts, and
// judges each exec before the new program's first instruction.
type supervisor struct {
	e        *Enforcer
	started  unix.Timespec
	execDirs []string
	pathDirs []string
	shell    int
	// optionsSet is set once the shell's first stop set traceOptions.
	optionsSet bool
	// mu guards tracees, which the waiter reads to kill what is left.
	mu      sync.Mutex
	tracees map[int]*tracee
	// refusal is the first exec refused; the whole tree is killed then.
	refusal *Refusal
	// spans records each program judged, when the run asked for spans.
	spans *spanLog
}

// startSupervised starts the runner's shell under ptrace and runs the
// supervisor on the goroutine's locked OS thread, which must stay the
// tracer for as long as any process of the tree lives. It returns once the
// shell started, or with the error that kept it from starting.
func startSupervised(o Options, e *Enforcer, argv []string, files []*os.File, p *process) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is never unlocked: it exits with the goroutine, so
		// no other goroutine inherits a thread that was a tracer.
		s := &supervisor{e: e, execDirs: o.ExecDirs, pathDirs: filepath.SplitList(getenvFrom(o.Env)("PATH")), tracees: map[int]*tracee{}, spans: p.spans}
		if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &s.started); err != nil {
			started <- fmt.Errorf("failed to read the clock: %w", err)
			return
		}
		if err := shieldRunner(); err != nil {
			started <- err
			return
		}
		// This thread forks the shell: what it carries, the whole tree
		// carries, and nothing the tree starts can leave the trace.
		if err := confineTree(); err != nil {
			started <- confineError(err)
			return
		}
		proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
			Dir: o.Dir, Env: o.Env, Files: []*os.File{files[0], files[1], files[2]},
			Sys: &syscall.SysProcAttr{Setpgid: true, Ptrace: true},
		})
		if err != nil {
			started <- startError(argv[0], err)
			return
		}
		p.pid = proc.Pid
		p.started = nowFunc()
		p.killTree = s.killAll
		s.shell = proc.Pid
		s.track(proc.Pid, &tracee{name: "the command line"})
		started <- nil
		s.loop(p)
		_ = proc.Release()
		p.refusal = s.refusal
		close(p.treeGone)
	}()
	return <-started
}

// shieldRunner makes the runner non-dumpable before the command starts.
// Every process of the tree runs as the runner's user, and the kernel lets
// a process of one user trace another of that user, read and write its
// memory (process_vm_readv and _writev, /proc/PID/mem) and take its file
// descriptors (/proc/PID/fd, pidfd_getfd): where kernel.yama.ptrace_scope
// is 0, or Yama is absent, a process of the tree could then change what
// the supervisor judges or what the runner reports. Only a process with
// CAP_SYS_PTRACE can do any of that to a process that is not dumpable,
// and the sandbox drops every capability. The seccomp filter
// (confineTree) also refuses the tree PTRACE_ATTACH, PTRACE_SEIZE and
// process_vm_*.
//
// Dumpability belongs to the process, not the thread, and only an exec
// or a change of credentials resets it, which the runner does not do
// after this: it lasts for the runner's life. An exec makes each program
// of the tree (the shell first) dumpable again, so the supervisor still
// reads /proc/PID of every tracee. The runner's own /proc/self stays
// readable to it: status, cgroup, mountinfo and the task folders are
// readable by all, and the kernel lets a process read its own exe link
// and fd folder; its environ, auxv and mem become root's, and the runner
// reads none of them.
func shieldRunner() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("failed to supervise the command: the runner cannot make itself non-dumpable "+
			"(prctl(PR_SET_DUMPABLE): %v), which keeps the command's processes from tracing it, and the "+
			"runner never runs a command unsupervised", err)
	}
	return nil
}

// startError explains why the shell did not start. PTRACE_TRACEME is the
// only step that fails with EPERM: the kernel or the container runtime
// forbids tracing, and the runner never runs a command unsupervised.
func startError(exe string, err error) error {
	if errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("failed to supervise the command: this sandbox does not let the runner trace the programs "+
			"the command starts (ptrace: %v), and the runner never runs a command unsupervised; "+
			"check seccomp, AppArmor and kernel.yama.ptrace_scope (at most 1)", err)
	}
	return fmt.Errorf("failed to start %s: %w", exe, err)
}

// loop handles the tree's stops until no traced process is left. When
// the shell ends, its status goes to p.exited at once; what it left
// running is the waiter's to stop, as it would stop the shell's group.
//
// The loop ends once the shell ended and every tracee it knows of did,
// not when the thread has no child left: the thread may have started
// other children before it became the tracer (the runner's process
// starts none, but a process that runs supervisors among other work,
// such as a test, does), and those outlive the tree. A new process whose
// creation the loop never saw (its parent was killed in fork) is stopped
// before its first instruction and killed as the thread exits
// (PTRACE_O_EXITKILL).
func (s *supervisor) loop(p *process) {
	shellDone := false
	for !shellDone || s.tracing() {
		var ws unix.WaitStatus
		// Only this thread's children and tracees: another supervisor
		// in the same process has its own thread.
		pid, err := unix.Wait4(-1, &ws, unix.WALL|unix.WNOTHREAD, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			if !shellDone {
				p.exited <- exitStatus{err: errors.New("the command's shell vanished")}
			}
			return
		case err != nil:
			s.killAll()
			if !shellDone {
				p.exited <- exitStatus{err: fmt.Errorf("failed to wait for the command's processes: %w", err)}
			}
			return
		}
		if ws.Exited() || ws.Signaled() {
			s.untrack(pid)
			if pid == s.shell {
				shellDone = true
				p.ended = nowFunc()
				p.exited <- exitStatus{status: syscall.WaitStatus(ws)}
			}
			continue
		}
		if ws.Stopped() {
			s.stopped(pid, ws)
		}
	}
}

// track and untrack keep the set of live tracees.
func (s *supervisor) track(pid int, t *tracee) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tracees[pid] = t
}

func (s *supervisor) untrack(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tracees, pid)
}

// tracing tells whether a tracee is left.
func (s *supervisor) tracing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tracees) > 0
}

// tracee returns what is known of pid, or nil.
func (s *supervisor) tracee(pid int) *tracee {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tracees[pid]
}

// stopped handles one ptrace stop and resumes the process, unless the
// stop was an exec the policy refuses.
func (s *supervisor) stopped(pid int, ws unix.WaitStatus) {
	t := s.tracee(pid)
	sig := ws.StopSignal()
	switch {
	case sig == unix.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_EXEC:
		// A thread other than the leader that execs takes the leader's
		// ID, and its own ends with no exit to wait for.
		if former, err := unix.PtraceGetEventMsg(pid); err == nil && int(former) != pid {
			s.untrack(int(former))
		}
		if !s.exec(pid, t) {
			return
		}
	case sig == unix.SIGTRAP && isCreate(ws.TrapCause()):
		s.created(pid, t)
	case pid == s.shell && !s.optionsSet && sig == unix.SIGTRAP:
		// The shell's first stop, right after its own exec.
		s.optionsSet = true
		if err := unix.PtraceSetOptions(pid, traceOptions); err != nil {
			s.refuse(&Refusal{What: "the command line", Reason: "the runner cannot supervise it: " + err.Error()})
			return
		}
	case t == nil && sig == unix.SIGSTOP:
		// A new process's first stop, before its parent's event arrived:
		// it waits for it (created resumes it).
		s.track(pid, &tracee{name: "a program", waiting: true})
		return
	case t != nil && t.fresh && sig == unix.SIGSTOP && pid != s.shell:
		t.fresh = false
	default:
		_ = unix.PtraceCont(pid, int(sig))
		return
	}
	_ = unix.PtraceCont(pid, 0)
}

// isCreate reports whether a trap cause is a new process or thread.
func isCreate(cause int) bool {
	return cause == unix.PTRACE_EVENT_FORK || cause == unix.PTRACE_EVENT_VFORK || cause == unix.PTRACE_EVENT_CLONE
}

// created records the process or thread pid just created: it runs the
// same program, with the same trust, until it execs.
func (s *supervisor) created(pid int, t *tracee) {
	msg, err := unix.PtraceGetEventMsg(pid)
	if err != nil {
		return
	}
	name, trusted := "a program", false
	if t != nil {
		name, trusted = t.name, t.trusted
	}
	child := int(msg)
	if c := s.tracee(child); c != nil {
		c.name, c.trusted = name, trusted
		if c.waiting {
			// Its first stop came first, and it waited for this.
			c.waiting = false
			_ = unix.PtraceCont(child, 0)
		}
		return
	}
	s.track(child, &tracee{name: name, trusted: trusted, fresh: true})
}

// exec judges the program pid is about to run. It reports whether the
// program may run; when it may not, the whole tree is killed.
func (s *supervisor) exec(pid int, t *tracee) bool {
	start := s.spans.now()
	if t == nil {
		t = &tracee{name: "a program"}
		s.track(pid, t)
	}
	prog, err := readProgram(pid)
	if err != nil {
		s.spans.exec(start, "", "", true)
		s.refuse(&Refusal{What: "a program started by " + t.name, Reason: "the runner cannot read it: " + err.Error()})
		return false
	}
	view := prog.view(readHead, resolvePath, s.pathDirs)
	// The binary is checked through /proc/PID/exe, the file that is
	// mapped; a script is read again by its interpreter, by its path.
	err = s.runnable(prog.Exe, "/proc/"+strconv.Itoa(pid)+"/exe")
	if err == nil && view.Script != "" {
		err = s.runnableScript(view.Script)
	}
	if err != nil {
		s.spans.exec(start, view.Called[0], "", true)
		s.refuse(&Refusal{What: argvText(view.Called), Reason: err.Error(), Program: prog.Exe, StartedBy: t.name})
		return false
	}
	action := "Trusted"
	if !t.trusted {
		d := s.e.judgeExec(view, readScript)
		action = string(d.Action)
		if err := s.e.refuse(argvText(view.Called), d.Decision); err != nil {
			s.spans.exec(start, view.Called[0], action, true)
			r := err.(*Refusal)
			r.Program, r.StartedBy = prog.Exe, t.name
			s.refuse(r)
			return false
		}
		t.trusted = d.trusted
	}
	s.spans.exec(start, view.Called[0], action, false)
	t.name = strconv.Quote(clip(filepath.Base(view.Called[0]), 64))
	return true
}

// runnable returns an error unless the file is one the sandbox lets run:
// on a read-only file system (the image, the skill's files) or in one of
// the ExecDirs, and in any case not created or changed since the run
// started, so a file the command wrote never runs. name is the file's
// path, file what to look at (it may be /proc/PID/exe).
func (s *supervisor) runnable(name, file string) error {
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		return fmt.Errorf("the runner cannot check the file %s: %v", name, err)
	}
	if st.Ctim.Sec > s.started.Sec || st.Ctim.Sec == s.started.Sec && st.Ctim.Nsec >= s.started.Nsec {
		return fmt.Errorf("%s was created or changed during the run, and a file the command wrote never runs", name)
	}
	fixed, err := s.fixed(name, file)
	if err != nil {
		return err
	}
	if !fixed {
		return fmt.Errorf("%s is on a writable file system, and programs run only from the read-only image and skill files", name)
	}
	return nil
}

// runnableScript is runnable for a script, which its interpreter opens
// again by its path after this check: every symlink on that path must
// be one the command cannot change, so the path still names this file.
func (s *supervisor) runnableScript(path string) error {
	for p := path; p != "/" && p != "."; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("the runner cannot check %s: %v", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			continue
		}
		if fixed, err := s.fixed(filepath.Dir(p), filepath.Dir(p)); err != nil || !fixed {
			return fmt.Errorf("%s is reached through the link %s in a writable folder, which could point elsewhere by the time it is read", path, p)
		}
	}
	return s.runnable(path, path)
}

// fixed reports whether the command cannot change what file names: it is
// on a read-only file system or, symlinks resolved, in one of the
// ExecDirs.
func (s *supervisor) fixed(name, file string) (bool, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(file, &fs); err != nil {
		return false, fmt.Errorf("the runner cannot check the file system of %s: %v", name, err)
	}
	if fs.Flags&unix.ST_RDONLY != 0 {
		return true, nil
	}
	real := resolvePath(name)
	for _, d := range s.execDirs {
		if rel, err := filepath.Rel(d, real); err == nil && filepath.IsLocal(rel) {
			return true, nil
		}
	}
	return false, nil
}

// refuse records the first refusal and kills every traced process, so
// nothing of the command runs on.
func (s *supervisor) refuse(r *Refusal) {
	if s.refusal == nil {
		s.refusal = r
	}
	s.killAll()
}

// killAll sends SIGKILL to every traced process: it reaches stopped
// tracees too, and none of them runs another instruction.
func (s *supervisor) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range s.tracees {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// readProgram reads what pid is about to run at its exec stop.
func readProgram(pid int) (program, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return program{}, err
	}
	exe, err := os.Readlink(dir + "/exe")
	if err != nil {
		return program{}, err
	}
	cwd, _ := os.Readlink(dir + "/cwd")
	argv := []string{}
	if len(cmdline) > 0 {
		for _, a := range bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0}) {
			argv = append(argv, string(a))
		}
	}
	return program{Argv: argv, Exe: exe, Dir: cwd}, nil
}

// readHead returns the first bytes of a regular file, or nil. It never
// blocks: a FIFO or device named as an argument is not read.
func readHead(path string) []byte {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	buf := make([]byte, maxShebang)
	n, _ := unix.Read(fd, buf)
	if n <= 0 {
		return nil
	}
	return buf[:n]
}

// readScript returns the text of a script a shell is about to run, at
// most policy.MaxCommandBytes of it: a longer one is not judged whole.
func readScript(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, policy.MaxCommandBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > policy.MaxCommandBytes {
		return "", fmt.Errorf("it is longer than %d bytes", policy.MaxCommandBytes)
	}
	return string(b), nil
}

// resolvePath returns path with every symlink resolved, or path itself.
func resolvePath(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}
