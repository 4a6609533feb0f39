// kstatus reads Kubernetes objects (a JSON list on stdin) and prints how kstatus, the library Flux
// and kpt use to wait for resources (sigs.k8s.io/cli-utils/pkg/kstatus/status), reads each: a JSON
// list of {"status": Current|InProgress|Failed|..., "message": ...}. The cluster tier runs it on
// the objects the operator wrote, read back from the real apiserver.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	var items []map[string]interface{}
	data, err := io.ReadAll(os.Stdin)
	if err == nil {
		err = utiljson.Unmarshal(data, &items) // integers as int64, as the API machinery reads them
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: stdin is not a JSON list of objects: %v\n", err)
		os.Exit(2)
	}
	out := make([]map[string]string, 0, len(items))
	for _, item := range items {
		result, err := status.Compute(&unstructured.Unstructured{Object: item})
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
			os.Exit(1)
		}
		out = append(out, map[string]string{"status": result.Status.String(), "message": result.Message})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
