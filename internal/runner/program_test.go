package runner

import (
	"reflect"
	"testing"
)

func TestProgramView(t *testing.T) {
	files := map[string]string{
		"/skill/scripts/snap.sh": "#!/usr/bin/env bash\nset -eu\n",
		"/usr/local/bin/tool":    "#!/bin/sh -e\necho\n",
		"/work/run.sh":           "#!/bin/sh\n",
		"/work/data.txt":         "not a script\n",
	}
	links := map[string]string{"/usr/bin/awk": "/usr/bin/gawk", "/usr/local/bin/tool": "/opt/tool/tool.sh"}
	readHead := func(p string) []byte {
		if s, ok := files[p]; ok {
			return []byte(s)
		}
		return nil
	}
	resolve := func(p string) string {
		if r, ok := links[p]; ok {
			return r
		}
		return p
	}
	pathDirs := []string{"/usr/local/bin", "/usr/bin", "/bin"}
	cases := []struct {
		name string
		prog program
		want execView
	}{
		{name: "a program under its own name",
			prog: program{Argv: []string{"kubectl", "get", "pods"}, Exe: "/usr/bin/kubectl"},
			want: execView{Called: []string{"kubectl", "get", "pods"}}},
		{name: "a program called by another name is judged under both",
			prog: program{Argv: []string{"awk", "{print}"}, Exe: "/usr/bin/gawk"},
			want: execView{Called: []string{"awk", "{print}"}, Real: []string{"gawk", "{print}"}}},
		{name: "a renamed copy or symlink is judged as the file that runs",
			prog: program{Argv: []string{"./x", "/tmp/p"}, Exe: "/usr/bin/touch"},
			want: execView{Called: []string{"./x", "/tmp/p"}, Real: []string{"touch", "/tmp/p"}}},
		{name: "a busybox applet is what argv[0] names",
			prog: program{Argv: []string{"ls", "-l"}, Exe: "/bin/busybox"},
			want: execView{Called: []string{"ls", "-l"}}},
		{name: "a multi-call binary called by its own name runs the applet its argument names",
			prog: program{Argv: []string{"busybox", "touch", "p"}, Exe: "/bin/busybox"},
			want: execView{Called: []string{"busybox", "touch", "p"}, Real: []string{"touch", "p"}}},
		{name: "GNU coreutils names its applet in an option",
			prog: program{Argv: []string{"/usr/bin/coreutils", "--coreutils-prog=touch", "p"}, Exe: "/usr/bin/coreutils"},
			want: execView{Called: []string{"/usr/bin/coreutils", "--coreutils-prog=touch", "p"}, Real: []string{"touch", "p"}}},
		{name: "a script a busybox shell runs is run in-process",
			prog: program{Argv: []string{"/bin/sh", "/work/run.sh"}, Exe: "/bin/busybox"},
			want: execView{Called: []string{"/work/run.sh"}, Script: "/work/run.sh", InProcess: true}},
		{name: "but not by busybox's env, which starts the shell the script names",
			prog: program{Argv: []string{"/usr/bin/env", "bash", "/skill/scripts/snap.sh"}, Exe: "/bin/busybox"},
			want: execView{Called: []string{"/skill/scripts/snap.sh"}, Script: "/skill/scripts/snap.sh"}},
		{name: "a script through #!/usr/bin/env is the script",
			prog: program{Argv: []string{"/usr/bin/env", "bash", "/skill/scripts/snap.sh", "-v"}, Exe: "/usr/bin/env"},
			want: execView{Called: []string{"/skill/scripts/snap.sh", "-v"}, Script: "/skill/scripts/snap.sh"}},
		{name: "and so is the shell env then starts",
			prog: program{Argv: []string{"bash", "/skill/scripts/snap.sh", "-v"}, Exe: "/bin/bash"},
			want: execView{Called: []string{"/skill/scripts/snap.sh", "-v"}, Script: "/skill/scripts/snap.sh"}},
		{name: "a script with an interpreter argument, found on PATH, by its base name and the file it links to",
			prog: program{Argv: []string{"/bin/sh", "-e", "/usr/local/bin/tool", "a"}, Exe: "/bin/dash"},
			want: execView{Called: []string{"tool", "a"}, Real: []string{"tool.sh", "a"}, Script: "/usr/local/bin/tool"}},
		{name: "a relative script path is read from the program's folder",
			prog: program{Argv: []string{"/bin/sh", "./run.sh"}, Exe: "/bin/dash", Dir: "/work"},
			want: execView{Called: []string{"./run.sh"}, Script: "/work/run.sh"}},
		{name: "a shell reading a file that is not a script is the shell",
			prog: program{Argv: []string{"sh", "/work/data.txt"}, Exe: "/bin/dash"},
			want: execView{Called: []string{"sh", "/work/data.txt"}, Real: []string{"dash", "/work/data.txt"}}},
		{name: "a script handed to another interpreter than its own is that interpreter",
			prog: program{Argv: []string{"perl", "/work/run.sh"}, Exe: "/usr/bin/perl"},
			want: execView{Called: []string{"perl", "/work/run.sh"}}},
		{name: "no argv at all",
			prog: program{Exe: "/usr/bin/touch"},
			want: execView{Called: []string{"/usr/bin/touch"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.prog.view(readHead, resolve, pathDirs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("view =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

func TestShebang(t *testing.T) {
	cases := []struct {
		head, interp, arg string
		ok                bool
	}{
		{"#!/bin/sh\n", "/bin/sh", "", true},
		{"#! /bin/sh -e \nx", "/bin/sh", "-e", true},
		{"#!/usr/bin/env -S bash -e\n", "/usr/bin/env", "-S bash -e", true},
		{"#!\n", "", "", false},
		{"echo hi\n", "", "", false},
		{"", "", "", false},
	}
	for _, tc := range cases {
		interp, arg, ok := shebang([]byte(tc.head))
		if interp != tc.interp || arg != tc.arg || ok != tc.ok {
			t.Errorf("shebang(%q) = %q, %q, %t; want %q, %q, %t", tc.head, interp, arg, ok, tc.interp, tc.arg, tc.ok)
		}
	}
}
