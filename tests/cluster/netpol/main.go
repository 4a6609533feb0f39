// The node tier's NetworkPolicy enforcer: kube-network-policies' controller
// (sigs.k8s.io/kube-network-policies/pkg/networkpolicy: nftables diverts the first packet of each
// connection from or to a pod that a NetworkPolicy selects into an nfqueue, and the controller
// accepts or drops it by the policies) run as a host process of the node, as the node's other
// components are. The project's own command runs only inside a pod (rest.InClusterConfig); this
// wrapper gives the same controller a kubeconfig instead, and nothing else.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster whose NetworkPolicies to enforce")
	nodeName := flag.String("hostname-override", "", "the Node's name: only its pods' traffic is judged here")
	queueID := flag.Int("nfqueue-id", 100, "the nfqueue that first packets are diverted to")
	failOpen := flag.Bool("fail-open", false, "let packets through while the controller is not reading the queue")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" {
		fmt.Fprintln(os.Stderr, "kube-network-policies: --kubeconfig and --hostname-override are required")
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("reading %s: %v", *kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("a client for %s: %v", config.Host, err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer cancel()

	factory := informers.NewSharedInformerFactory(client, 0)
	controller, err := networkpolicy.NewController(client,
		factory.Networking().V1().NetworkPolicies(), factory.Core().V1().Namespaces(), factory.Core().V1().Pods(),
		nil, nil, nil, nil, // nodes and the alpha AdminNetworkPolicy APIs: not used
		networkpolicy.Config{
			FailOpen: *failOpen, QueueID: *queueID, NodeName: *nodeName,
			// NRI stays on though the node's containerd (1.6) offers none: its connection fails, says
			// so once, and pod IPs come from the API server; with NRI off, v0.8.0 dereferences a nil
			// plugin for any address that is no pod's (the node's own, a Service's) and dies
			NRIdisabled: false,
			// the DNS race it works around is fixed in kernels 6.12 and newer; judged like any packet otherwise
			NetfilterBug1766Fix: false,
		})
	if err != nil {
		klog.Fatalf("starting the NetworkPolicy controller: %v", err)
	}
	factory.Start(ctx.Done())
	if err := controller.Run(ctx); err != nil { // returns when ctx ends, after removing its nftables table
		klog.Errorf("NetworkPolicy controller: %v", err)
	}
}
