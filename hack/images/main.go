// Command images writes the container images the end-to-end tests load into
// a cluster's containerd, as docker-archive tarballs that
// `ctr -n k8s.io images import FILE` takes, from binaries built on the host:
// no Docker engine, no registry.
//
//	go run . -bin BIN_DIR -out OUT_DIR
//
// BIN_DIR holds static binaries: manager, agent, runner, kubectl-skills,
// modelserver, otelcol, coredns, source-controller, kustomize-controller and
// pause (see build.sh, which builds them and the tools and runs this). The
// images, with fully normalized names:
//
//	kubeskills.tar   docker.io/kubeskills/kubeskills:dev   the four kubeskills binaries in /usr/local/bin, entrypoint manager
//	toolbox.tar      docker.io/kubeskills/toolbox:dev      the sandbox image: busybox and its applets, bash, curl, jq, kubectl in /bin, CA certificates
//	pause.tar        docker.io/kubeskills/pause:dev        /pause, containerd's sandbox image
//	modelserver.tar  docker.io/kubeskills/modelserver:dev  the scripted model server, entrypoint modelserver
//	coredns.tar      docker.io/kubeskills/coredns:dev      the local cluster's DNS, entrypoint coredns
//	otelcol.tar      docker.io/kubeskills/otelcol:dev      the OpenTelemetry Collector of the end-to-end tests, entrypoint otelcol
//	flux.tar         docker.io/kubeskills/flux:dev         Flux's source-controller and kustomize-controller in /usr/local/bin, no entrypoint
//	skill-cost-report.tar
//	                 docker.io/kubeskills/skill-cost-report:dev
//	                 the files of a skill folder (-skill) at its root, for a Skill's spec.bundle.image
//
// Every binary is read as ELF before it goes into an image: a static one
// goes alone; a dynamic one brings its interpreter and the libraries it
// needs, found in the loader's system folders, or the build fails saying
// what to install. No image is written that cannot run.
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
	var in inputs
	out := flag.String("out", "", "folder the tarballs are written to")
	flag.StringVar(&in.bin, "bin", "", "folder holding the static binaries manager, agent, runner, kubectl-skills, modelserver, otelcol, coredns, source-controller, kustomize-controller and pause")
	flag.StringVar(&in.busybox, "busybox", "/bin/busybox", "busybox (Debian's busybox-static)")
	flag.StringVar(&in.bash, "bash", "/bin/bash", "bash, with its libraries")
	flag.StringVar(&in.curl, "curl", "/usr/bin/curl", "curl, with its libraries")
	flag.StringVar(&in.kubectl, "kubectl", "", "kubectl, the cluster's version (hack/build-k8s.sh kubectl)")
	flag.StringVar(&in.jq, "jq", "", "gojq (hack/build-addons.sh gojq)")
	flag.StringVar(&in.caCerts, "ca-certificates", caBundle, "the CA bundle (Debian's ca-certificates)")
	flag.StringVar(&in.skill, "skill", "", "the skill folder whose files the skill bundle image holds (config/samples/skills/cost-report)")
	flag.Parse()
	if *out == "" || in.bin == "" || in.kubectl == "" || in.jq == "" || in.skill == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go run . -bin BIN_DIR -out OUT_DIR -kubectl KUBECTL -jq GOJQ -skill SKILL_DIR [-busybox /bin/busybox] [-bash /bin/bash] [-curl /usr/bin/curl]")
		os.Exit(2)
	}
	in.libDirs = systemLibDirs()
	if err := run(*out, in); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(out string, in inputs) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	images, err := specs(in)
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
