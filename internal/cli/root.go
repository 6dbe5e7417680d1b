// Package cli is the kubectl plugin `kubectl skills`: it imports Agent Skill
// folders as Skill manifests, exports Skills back to folders, and validates
// both offline with the rules the operator applies.
//
// Each subcommand lives in its own file and is added to the root command by
// NewRootCommand; the doctor and the MCP bridge, products of their own, live
// in the packages doctor, mcpbridge and ui below this one. A subcommand receives
// the shared *cmdline.Options, which hold the output streams and the
// standard kubectl connection flags, and builds its API client through
// Options.Client only when it talks to a cluster.
//
// A command that finds problems in its inputs prints each of them, as
// `PATH: FIELD: PROBLEM (HINT)`, and returns cmdline.ErrProblems, which makes
// the process exit with code 1 without printing anything more.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/cli/doctor"
	"github.com/kubeskills/kubeskills/internal/cli/mcpbridge"
	"github.com/kubeskills/kubeskills/internal/cli/ui"
)

// Exit codes of the plugin.
const (
	// ExitOK means every input was valid and every action done.
	ExitOK = 0
	// ExitFailed means an input had problems, an action failed, or the
	// command line was wrong.
	ExitFailed = 1
)

const rootLong = `Manage kubeskills from the command line.

A skill is a folder holding a SKILL.md (YAML front matter with name and
description, then Markdown instructions) and any bundled files (scripts/,
references/, assets/). In a cluster it is a Skill object of the API group
kubeskills.io/v1alpha1, which the kubeskills operator validates and serves to
agents.

  import        turns skill folders into Skill manifests for kubectl apply
  export        writes a Skill (from the cluster or a manifest) back to a folder
  validate      checks folders and manifests offline, with the operator's rules
  policy check  tells what a CommandPolicy decides for a command, offline
  approve, deny decide on a command that waits for a person
  list          lists CommandRuns (--pending: those waiting for a person;
                --watch follows them)
  doctor        tells whether a cluster is fit for kubeskills, and proves the
                sandbox's network fence with canary pods
  mcp           serves an Agent's MCP endpoint over stdio, for MCP hosts
  ui            starts a local web console, as you: the approvals inbox,
                runs with their output and timeline, skills, agents and
                policies

Problems are printed one per line as PATH: FIELD: PROBLEM (HINT), where FIELD
is the Skill field concerned. A command that finds a problem exits with 1.

The plugin reads the kubeconfig like kubectl does; only commands that talk to
a cluster (export NAME, approve, deny, list, doctor, mcp, ui) use it.`

// NewRootCommand returns the `kubectl skills` command and its subcommands.
func NewRootCommand(o *cmdline.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "Manage Agent Skills and approve the commands agents ask to run",
		Long:  rootLong,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl skills",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(o.Streams.In)
	cmd.SetOut(o.Streams.Out)
	cmd.SetErr(o.Streams.ErrOut)
	o.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		newImportCommand(o),
		newExportCommand(o),
		newValidateCommand(o),
		newPolicyCommand(o),
		newApproveCommand(o),
		newDenyCommand(o),
		newListCommand(o),
		doctor.NewCommand(o),
		mcpbridge.NewCommand(o),
		ui.NewCommand(o),
	)
	return cmd
}

// Execute runs the plugin with the command-line arguments (without the
// program name) and returns the process exit code.
func Execute(args []string, streams genericiooptions.IOStreams) int {
	return ExecuteContext(context.Background(), args, streams)
}

// ExecuteContext is Execute with a context: commands that follow the
// cluster (list --watch) stop when it is done.
func ExecuteContext(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	cmd := NewRootCommand(cmdline.NewOptions(streams))
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, cmdline.ErrProblems):
		return ExitFailed
	}
	printError(streams.ErrOut, err)
	return ExitFailed
}

// printError prints an error the way kubectl does.
func printError(w io.Writer, err error) {
	_, _ = fmt.Fprintf(w, "error: %v\n", err)
}
