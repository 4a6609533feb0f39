//go:build tools

// Package tools pins the commands this module builds, so `go mod tidy` keeps them in go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
