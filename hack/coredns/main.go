// Command coredns is the local cluster's DNS: CoreDNS with only the plugins
// the cluster's Corefile (hack/cluster/addons.yaml) uses, the way CoreDNS
// documents a build with a chosen plugin list. A plugin registers itself
// when imported; the Corefile refuses any directive whose plugin is not
// imported here. The version is pinned in go.mod.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
