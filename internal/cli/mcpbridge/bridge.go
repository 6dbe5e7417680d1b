// Package mcpbridge is the command `kubectl skills mcp`: it serves an
// Agent's MCP endpoint over stdio, for MCP hosts that start their servers
// as commands, relaying every message through a port-forward tunnel to a
// ready pod of the agent.
//
// The root command of the plugin (package cli) adds it through NewCommand;
// it shares with the other commands only package cmdline.
package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

const mcpLong = `Serve the MCP endpoint of the Agent NAME over stdio, for MCP hosts that
start their servers as commands (Claude Code, Codex, VS Code and others).

Every JSON-RPC message the host writes to stdin goes, unchanged, to the
agent's /mcp endpoint (streamable HTTP), and every message of the agent
comes back on stdout: requests, answers and notifications, the Skills
extension's skills/list and skills/get included. Stdout carries nothing but
the protocol; errors go to stderr, one line each.

The agent is reached with your kubeconfig, as kubectl port-forward reaches
it: through the API server's portforward subresource of a ready pod behind
the Service agent-NAME, with no local port opened. The bearer token is read
from the Agent's token Secret with your rights and held in memory only:
nothing is written to disk or printed. In the Agent's namespace you need get
on agents, services and secrets, list on pods, and get and create on
pods/portforward.

It fails, with one line on stderr, when the Agent does not exist, serves no
MCP (spec.mcp.enabled: false), has no ready pod, or you may not read what
it needs; and it ends when the host closes stdin, on Ctrl-C, or when the
pod goes away (the host starts it again).

Exit status: 0 when the host ended the session, 1 otherwise.`

const mcpExample = `  # Serve the agent ops of the namespace agents to an MCP host on stdio
  kubectl skills mcp --agent ops -n agents

  # Add it to Claude Code
  claude mcp add ops -- kubectl skills mcp --agent ops -n agents`

// options are the flags of mcp.
type options struct {
	*cmdline.Options
	agent string
}

// NewCommand returns the command mcp, which the root command of the plugin
// adds to its own.
func NewCommand(o *cmdline.Options) *cobra.Command {
	opts := &options{Options: o}
	cmd := &cobra.Command{
		Use:     "mcp --agent NAME",
		Short:   "Serve an Agent's MCP endpoint over stdio, for MCP hosts",
		Long:    mcpLong,
		Example: mcpExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&opts.agent, "agent", "", "Name of the Agent whose MCP endpoint to serve")
	_ = cmd.MarkFlagRequired("agent")
	return cmd
}

// run finds the agent, opens the tunnel to its pod and relays until the
// host is done.
func (o *options) run(ctx context.Context) error {
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	c, err := o.Client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	target, err := lookupAgent(ctx, c, ns, o.agent, true)
	if err != nil {
		return err
	}
	u, err := portForwardURL(cfg, ns, target.pod)
	if err != nil {
		return err
	}
	tunnel, err := openTunnel(cfg, u, target.pod, target.port)
	if err != nil {
		return explainBridgeAccess(err, fmt.Sprintf("port-forward to pod %s/%s of agent %s", ns, target.pod, target.name))
	}
	defer func() { _ = tunnel.Close() }()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-tunnel.Lost():
			cancel(fmt.Errorf("%w %s/%s", errLostTunnel, ns, target.pod))
		case <-ctx.Done():
		}
	}()
	err = serveMCP(ctx, o.Streams.In, o.Streams.Out, o.Streams.ErrOut, bridgeEndpoint{
		url: podEndpoint(target.port), token: target.token, dial: tunnel.DialContext,
	})
	if cause := context.Cause(ctx); errors.Is(cause, errLostTunnel) {
		err = cause
	}
	return o.explainRelay(err, target)
}

// podEndpoint is the URL of the MCP endpoint through a tunnel to the pod's
// port. The kubelet connects to the port from inside the pod, over
// loopback, and the SDK's server refuses a loopback connection whose Host
// names another host (its DNS rebinding protection): the Host is
// localhost, as with kubectl port-forward.
func podEndpoint(port int32) string {
	return "http://localhost:" + strconv.Itoa(int(port)) + "/mcp"
}

// explainRelay names the agent and its Secret in the relay's errors.
func (o *options) explainRelay(err error, t *agentTarget) error {
	switch {
	case errors.Is(err, errTokenRefused):
		return fmt.Errorf("agent %s/%s: %w: the token of Secret %s is not the one the agent reads (was it just changed? run again)",
			t.namespace, t.name, err, t.tokenSecret)
	case errors.Is(err, errNoEndpoint):
		return fmt.Errorf("agent %s/%s: %w: its runtime does not serve MCP (spec.mcp.enabled false, or a runtime image without MCP)",
			t.namespace, t.name, err)
	case err != nil:
		return fmt.Errorf("agent %s/%s: %w", t.namespace, t.name, err)
	}
	return nil
}

// bridgeEndpoint is how the relay reaches the agent's MCP endpoint.
type bridgeEndpoint struct {
	// url is the endpoint's URL.
	url string
	// token is the bearer token; "" sends none.
	token string
	// dial opens a connection to the agent; nil dials url's host.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// serveMCP relays the MCP session of the host on in and out to the agent
// until the host closes in, ctx ends, or either side fails.
func serveMCP(ctx context.Context, in io.Reader, out, errOut io.Writer, ep bridgeEndpoint) error {
	state := &sessionState{}
	base := &http.Transport{DialContext: ep.dial, MaxIdleConns: 8, IdleConnTimeout: 90 * time.Second}
	defer base.CloseIdleConnections()
	httpClient := &http.Client{Transport: &agentTransport{base: base, token: ep.token, state: state}}
	hostConn, err := (&mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("failed to open stdio: %w", err)
	}
	agentConn, err := (&mcp.StreamableClientTransport{
		Endpoint:   ep.url,
		HTTPClient: httpClient,
		// The relay opens the standalone stream itself (see listen).
		DisableStandaloneSSE: true,
	}).Connect(ctx)
	if err != nil {
		_ = hostConn.Close()
		return fmt.Errorf("failed to connect to the agent's MCP endpoint: %w", err)
	}
	return newRelay(hostConn, agentConn, httpClient, ep.url, state, errOut).run(ctx)
}

// nopWriteCloser leaves the host's output open when the session ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
