// Command images writes the container images the end-to-end tests load into
// a cluster's containerd, as docker-archive tarballs that
// `ctr -n k8s.io images import FILE` takes, from binaries built on the host:
// no Docker engine, no registry.
//
//	go run . -bin BIN_DIR -out OUT_DIR
//
// BIN_DIR holds static binaries: manager, agent, runner, kubectl-skills,
// modelserver and pause (see build.sh, which builds them and runs this).
// The images, with fully normalized names:
//
//	kubeskills.tar   docker.io/kubeskills/kubeskills:dev   the four kubeskills binaries in /usr/local/bin, entrypoint manager
//	toolbox.tar      docker.io/kubeskills/toolbox:dev      busybox and its applets in /bin, the sandbox image
//	pause.tar        docker.io/kubeskills/pause:dev        /pause, containerd's sandbox image
//	modelserver.tar  docker.io/kubeskills/modelserver:dev  the scripted model server, entrypoint modelserver
//
// Every file has a fixed time and owner, so the same binaries make the same
// images; a tarball that already holds the image is left alone. The
// tarballs' paths are printed on stdout, one a line.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "", "folder the tarballs are written to")
	bin := flag.String("bin", "", "folder holding the static binaries manager, agent, runner, kubectl-skills, modelserver and pause")
	busybox := flag.String("busybox", "/bin/busybox", "a static busybox (Debian's busybox-static)")
	flag.Parse()
	if *out == "" || *bin == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go run . -bin BIN_DIR -out OUT_DIR [-busybox /bin/busybox]")
		os.Exit(2)
	}
	if err := run(*out, *bin, *busybox); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(out, bin, busybox string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	images, err := specs(bin, busybox)
	if err != nil {
		return err
	}
	for _, s := range images {
		res, err := s.build(out)
		if err != nil {
			return err
		}
		what := "up to date"
		if res.written {
			what = "written"
		}
		fmt.Fprintf(os.Stderr, "%-38s %s %s\n", res.ref, res.id.Hex[:12], what)
		fmt.Println(res.path)
	}
	return nil
}
