// Package cli is the kubectl plugin `kubectl skills`: it imports Agent Skill
// folders as Skill manifests, exports Skills back to folders, and validates
// both offline with the rules the operator applies.
//
// Each subcommand lives in its own file and is added to the root command by
// NewRootCommand. A subcommand receives the shared *Options, which hold the
// output streams and the standard kubectl connection flags, and builds its
// API client through Options.Client only when it talks to a cluster.
//
// A command that finds problems in its inputs prints each of them, as
// `PATH: FIELD: PROBLEM (HINT)`, and returns ErrProblems, which makes the
// process exit with code 1 without printing anything more.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	kubescheme "github.com/kubeskills/kubeskills/internal/scheme"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Exit codes of the plugin.
const (
	// ExitOK means every input was valid and every action done.
	ExitOK = 0
	// ExitFailed means an input had problems, an action failed, or the
	// command line was wrong.
	ExitFailed = 1
)

// ErrProblems is returned by a command that has already printed the problems
// it found; the process exits with ExitFailed and prints nothing more.
var ErrProblems = errors.New("problems were found")

// Options are shared by every subcommand.
type Options struct {
	// Streams are where commands read and write.
	Streams genericiooptions.IOStreams
	// ConfigFlags are the standard kubectl flags: --kubeconfig, --context,
	// -n/--namespace and the rest.
	ConfigFlags *genericclioptions.ConfigFlags
	// NewClient builds the API client from ConfigFlags; tests may replace it.
	NewClient func(flags *genericclioptions.ConfigFlags) (client.WithWatch, error)
}

// NewOptions returns Options writing to streams and reading the kubeconfig
// the way kubectl does.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		Streams:     streams,
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		NewClient:   newClient,
	}
}

// Client returns an API client for the cluster the kubectl flags select.
func (o *Options) Client() (client.Client, error) {
	return o.NewClient(o.ConfigFlags)
}

// WatchClient returns an API client that can also watch.
func (o *Options) WatchClient() (client.WithWatch, error) {
	return o.NewClient(o.ConfigFlags)
}

// FlagNamespace returns the value of -n/--namespace, "" when it is not set.
// Offline commands use it as is and never read the kubeconfig.
func (o *Options) FlagNamespace() string {
	if o.ConfigFlags.Namespace == nil {
		return ""
	}
	return *o.ConfigFlags.Namespace
}

// Namespace returns the namespace a cluster command works in: -n when set,
// else the namespace of the kubeconfig's current context, else "default".
func (o *Options) Namespace() (string, error) {
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("failed to read namespace from kubeconfig: %w", err)
	}
	return ns, nil
}

// newClient builds a controller-runtime client knowing the kubeskills kinds
// from the REST config that the kubectl flags describe.
func newClient(flags *genericclioptions.ConfigFlags) (client.WithWatch, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	scheme, err := kubescheme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

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

Problems are printed one per line as PATH: FIELD: PROBLEM (HINT), where FIELD
is the Skill field concerned. A command that finds a problem exits with 1.

The plugin reads the kubeconfig like kubectl does; only commands that talk to
a cluster (export NAME, approve, deny, list, doctor, mcp) use it.`

// NewRootCommand returns the `kubectl skills` command and its subcommands.
func NewRootCommand(o *Options) *cobra.Command {
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
		newDoctorCommand(o),
		newMCPCommand(o),
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
	cmd := NewRootCommand(NewOptions(streams))
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrProblems):
		return ExitFailed
	}
	printError(streams.ErrOut, err)
	return ExitFailed
}

// printError prints an error the way kubectl does.
func printError(w io.Writer, err error) {
	_, _ = fmt.Fprintf(w, "error: %v\n", err)
}
