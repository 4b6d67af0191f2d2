// Command coredns is CoreDNS v1.14.7 with only the plugins the local cluster's Corefile uses
// (hack/cluster/up.sh): the default build links every plugin, cloud SDKs included, and took ~5 min
// of a cold CI run to compile for nothing. CoreDNS supports this embedding (core/dnsserver/server.go):
// import the plugins, then set Directives, in the order of CoreDNS's own plugin.cfg.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	dnsserver.Directives = []string{
		"reload", "ready", "health", "prometheus", "errors", "loadbalance", "cache", "kubernetes", "loop", "forward",
	}
}

func main() { coremain.Run() }
