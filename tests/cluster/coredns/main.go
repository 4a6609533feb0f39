// coredns is CoreDNS with only the plugins the node tier's Corefile uses (src/sluice/testing/node.py:
// bind, errors, kubernetes, forward, cache, loop), the way CoreDNS documents a custom build: its
// coremain plus the chosen plugin packages. The stock `go install github.com/coredns/coredns`
// compiles every plugin, cloud SDKs and tracers included; this build compiles a fraction of that
// on a cold machine. The directive order stays CoreDNS's own (core/dnsserver).
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
)

func main() {
	coremain.Run()
}
