// Command kubectl-skills is the kubectl plugin of kubeskills. With the
// binary on PATH, kubectl runs it as `kubectl skills`:
//
//	kubectl skills import DIR...          print Skill manifests for skill folders
//	kubectl skills export NAME|FILE -o DIR write a Skill back to a folder
//	kubectl skills validate PATH...       check folders and manifests offline
//	kubectl skills policy check -f P -- C  what a CommandPolicy decides for C
//	kubectl skills approve|deny RUN       decide on a command awaiting approval
//	kubectl skills list [--pending [-w]]  list CommandRuns, or follow those awaiting approval
//	kubectl skills doctor                 check a cluster and prove the sandbox's fence
//	kubectl skills mcp --agent NAME       serve an Agent's MCP endpoint on stdio
//
// Run `kubectl skills COMMAND --help` for the flags and the rules. The
// commands live in package github.com/kubeskills/kubeskills/internal/cli,
// the doctor and the MCP bridge in its packages doctor and mcpbridge.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeskills/kubeskills/internal/cli"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(cli.Execute(os.Args[1:], streams))
}
