package mcpbridge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AgentAPI is an agent's HTTP API reached as the bridge reaches it: through
// a tunnel to a ready pod, opened with the person's rights, with the
// agent's bearer token held in memory only.
type AgentAPI struct {
	// URL is the API's root, through the tunnel: http://localhost:PORT.
	URL string
	// Token is the bearer token; "" when the Agent serves without one.
	Token string
	// Client sends requests through the tunnel.
	Client *http.Client
	tunnel *podTunnel
}

// Close closes the tunnel.
func (a *AgentAPI) Close() error {
	a.Client.CloseIdleConnections()
	return a.tunnel.Close()
}

// Connect opens a tunnel to a ready pod of the Agent name in ns, with the
// rights of the person cfg and c authenticate as (see bridgeRights), for
// its HTTP API (/v1). The caller closes it.
func Connect(ctx context.Context, cfg *rest.Config, c client.Client, ns, name string) (*AgentAPI, error) {
	target, err := lookupAgent(ctx, c, ns, name, false)
	if err != nil {
		return nil, err
	}
	u, err := portForwardURL(cfg, ns, target.pod)
	if err != nil {
		return nil, err
	}
	tunnel, err := openTunnel(cfg, u, target.pod, target.port)
	if err != nil {
		return nil, explainBridgeAccess(err, fmt.Sprintf("port-forward to pod %s/%s of agent %s", ns, target.pod, name))
	}
	return &AgentAPI{
		URL:    "http://localhost:" + strconv.Itoa(int(target.port)),
		Token:  target.token,
		Client: &http.Client{Transport: &http.Transport{DialContext: tunnel.DialContext, IdleConnTimeout: 30 * time.Second}},
		tunnel: tunnel,
	}, nil
}
