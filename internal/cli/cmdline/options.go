// Package cmdline holds what every command of the kubectl plugin shares,
// whichever package defines it: the Options a command receives (its output
// streams, the standard kubectl connection flags and the API client they
// describe), ErrProblems, and how text from the cluster is printed.
//
// The root command lives in package cli, which adds the commands of the
// packages beside it (doctor, mcpbridge) to its own; those packages import
// this one and never package cli.
package cmdline

import (
	"fmt"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubescheme "github.com/kubeskills/kubeskills/internal/scheme"
)

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
