//go:build linux

package runner

import (
	"fmt"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// A process the supervisor traces can ask the kernel not to be followed:
// clone(2) with CLONE_UNTRACED makes a child ptrace does not attach to,
// whatever PTRACE_O_TRACE* say, and no program that child execs would be
// judged. And every process of the tree runs as the runner's user, which
// the kernel lets trace the runner or read and write its memory. confineTree
// closes both with a seccomp filter on the whole supervised tree:
//
//   - clone with CLONE_UNTRACED in its flags fails with EPERM;
//   - clone3 fails with ENOSYS: its flags are in a struct in the caller's
//     memory, which a filter cannot read. ENOSYS is what a kernel without
//     clone3 answers, and glibc, musl and Go then use clone (the Go
//     runtime and os/exec use clone anyway);
//   - ptrace with PTRACE_ATTACH or PTRACE_SEIZE fails with EPERM, and so
//     do process_vm_readv and process_vm_writev: no process of the tree
//     can trace the runner or read or write its memory (shieldRunner is
//     the other wall), nor another process's. ptrace's other requests
//     stay: the supervisor's thread carries the filter as well and sends
//     them to its tracees, and the kernel takes them only from a
//     process's tracer, which no process of the tree can become (without
//     those two requests; PTRACE_TRACEME fails for a process that is
//     traced already, as every process of the tree is);
//   - every other system call is allowed.
//
// The rules hold for the native ABI and for the 32-bit one a process can
// also call (int 0x80 on amd64, an AArch32 program on arm64); the x32 ABI
// on amd64 gets ENOSYS for every call.

// Offsets in struct seccomp_data.
const (
	seccompNrOffset   = 0
	seccompArchOffset = 4
	// seccompArg0Offset is the low half of args[0] on a little-endian
	// machine (amd64, arm64), where CLONE_UNTRACED is; a 32-bit ABI's
	// arguments are 32 bits.
	seccompArg0Offset = 16
)

// Return values of the filters.
const (
	seccompAllow  = unix.SECCOMP_RET_ALLOW
	seccompEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	seccompENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// confineTree sets no_new_privs and installs the filters on the calling
// thread only (no SECCOMP_FILTER_FLAG_TSYNC). startSupervised calls it on
// the supervisor's thread, locked with runtime.LockOSThread, just before
// that thread forks the shell: the kernel hands a thread's filters and
// no_new_privs to every process and thread it creates, keeps them across
// execve, and lets no process remove them, so the shell and everything
// it starts carry them. That is what installing them between fork and exec
// would do, which os/exec has no hook for. The rest of the runner is not
// filtered: the Go runtime never runs another goroutine on a locked
// thread nor creates its threads from one, and the thread exits with the
// supervisor's goroutine (the main thread, which the runtime never ends,
// stays parked for good). The supervisor itself only clones when
// os.StartProcess forks the shell, without CLONE_UNTRACED.
//
// An unprivileged process needs no_new_privs to install a filter; a
// sandbox container (allowPrivilegeEscalation: false) already runs with
// it. It also keeps setuid and file-capability programs of the tree from
// gaining privileges.
func confineTree() error {
	filters, err := treeFilters()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	for _, f := range filters {
		if err := loadFilter(f); err != nil {
			return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", err)
		}
	}
	return nil
}

// treeFilters returns the programs confineTree installs: the native
// ABI's, then the 32-bit ABI's. go-seccomp-bpf assembles the native one
// (with its check of the architecture and x32); it allows every call of
// another architecture, and cannot target one, so the 32-bit ABI's rules
// are a second, short program.
func treeFilters() ([][]bpf.Instruction, error) {
	compat, err := compatABI()
	if err != nil {
		return nil, err
	}
	native := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{
				// The flags are clone's first argument on amd64 and
				// arm64 (not on s390x).
				NamesWithCondtions: []seccomp.NameWithConditions{{Name: "clone", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_UNTRACED},
				}}},
				Action: seccomp.Action(seccompEPERM),
			},
			{
				// The requests that make the caller a tracer; the
				// supervisor's thread carries the filter too, and its
				// other requests, as every request on a tracee, must work.
				NamesWithCondtions: []seccomp.NameWithConditions{
					{Name: "ptrace", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: unix.PTRACE_ATTACH}}},
					{Name: "ptrace", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: unix.PTRACE_SEIZE}}},
				},
				Names:  []string{"process_vm_readv", "process_vm_writev"},
				Action: seccomp.Action(seccompEPERM),
			},
			{Names: []string{"clone3"}, Action: seccomp.Action(seccompENOSYS)},
		},
	}
	prog, err := native.Assemble()
	if err != nil {
		return nil, fmt.Errorf("failed to assemble the seccomp filter: %w", err)
	}
	compatProg, err := abiFilter(compat)
	if err != nil {
		return nil, err
	}
	return [][]bpf.Instruction{prog, compatProg}, nil
}

// abiFilter is the rules for one ABI alone: it allows every call of
// another. It reads the low half of clone's flags and of ptrace's
// request, which is all of them in a 32-bit ABI and holds CLONE_UNTRACED
// in any.
func abiFilter(abi *arch.Info) ([]bpf.Instruction, error) {
	nr, err := syscallNumbers(abi, "clone", "clone3", "ptrace", "process_vm_readv", "process_vm_writev")
	if err != nil {
		return nil, err
	}
	clone, clone3, ptrace, vmRead, vmWrite := nr[0], nr[1], nr[2], nr[3], nr[4]
	return []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: seccompArchOffset, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(abi.ID), SkipTrue: 11}, // 13
		/* 2 */ bpf.LoadAbsolute{Off: seccompNrOffset, Size: 4},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: clone3, SkipTrue: 11}, // 15
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: vmRead, SkipTrue: 9}, // 14
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: vmWrite, SkipTrue: 8}, // 14
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: ptrace, SkipTrue: 3}, // 10
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: clone, SkipTrue: 5}, // 13
		/* 8 */ bpf.LoadAbsolute{Off: seccompArg0Offset, Size: 4},
		/* 9 */ bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.CLONE_UNTRACED, SkipTrue: 4, SkipFalse: 3}, // 14, 13
		/* 10 */ bpf.LoadAbsolute{Off: seccompArg0Offset, Size: 4},
		/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PTRACE_ATTACH, SkipTrue: 2}, // 14
		/* 12 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PTRACE_SEIZE, SkipTrue: 1}, // 14
		/* 13 */ bpf.RetConstant{Val: seccompAllow},
		/* 14 */ bpf.RetConstant{Val: seccompEPERM},
		/* 15 */ bpf.RetConstant{Val: seccompENOSYS},
	}, nil
}

// compatABI returns the 32-bit ABI that processes of this architecture can
// also call.
func compatABI() (*arch.Info, error) {
	switch runtime.GOARCH {
	case "amd64":
		return arch.I386, nil
	case "arm64":
		return arch.ARM, nil
	}
	return nil, fmt.Errorf("the runner filters the system calls of the command's processes only on amd64 and arm64, not %s", runtime.GOARCH)
}

// syscallNumbers looks system calls up in an ABI's table, in order.
func syscallNumbers(abi *arch.Info, names ...string) ([]uint32, error) {
	nrs := make([]uint32, len(names))
	for i, name := range names {
		nr, ok := abi.SyscallNames[name]
		if !ok {
			return nil, fmt.Errorf("no %s in the %s system call table", name, abi.Name)
		}
		nrs[i] = uint32(nr)
	}
	return nrs, nil
}

// loadFilter installs one program on the calling thread.
func loadFilter(prog []bpf.Instruction) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return errno
	}
	return nil
}

// confineError explains why the command does not run without the filter.
// The cause is not wrapped: an EPERM or EACCES here is the runner's
// failure (125), not a program that cannot run (126).
func confineError(err error) error {
	return fmt.Errorf("failed to supervise the command: the runner cannot install the seccomp filter that keeps "+
		"the programs the command starts from leaving its supervision (%v), and the runner never runs a command "+
		"unsupervised; check that the kernel has seccomp filters and that the container's seccomp profile allows "+
		"seccomp and prctl", err)
}
