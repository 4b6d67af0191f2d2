// Command versionmarkers writes the etcd versions the operator supports (internal/versions) into the
// markers of EtcdClusterSpec.Version: its default and the console's choice of versions (one
// `select:<version>` x-descriptor each), so the CRD and the CSV offer exactly the versions the
// operator has images for. Run by make generate, before controller-gen and operator-sdk read the
// markers; make verify-generated fails when the committed file differs.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// field is the declaration whose comment block carries the markers.
const field = "\tVersion string `json:\"version,omitempty\"`"

func main() {
	file := flag.String("file", "api/v1alpha1/etcdcluster_types.go", "the Go file declaring EtcdClusterSpec")
	flag.Parse()
	if err := run(*file); err != nil {
		fmt.Fprintln(os.Stderr, "versionmarkers:", err)
		os.Exit(1)
	}
}

func run(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := rewrite(string(raw))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if out == string(raw) {
		return nil
	}
	return os.WriteFile(file, []byte(out), 0o644)
}

// rewrite replaces the default and the xDescriptors of the Version field's operator-sdk marker.
func rewrite(src string) (string, error) {
	lines := strings.Split(src, "\n")
	at := -1
	for i, l := range lines {
		if l == field {
			at = i
			break
		}
	}
	if at < 0 {
		return "", fmt.Errorf("no %q declaration", strings.TrimSpace(field))
	}
	var selects []string
	for _, v := range versions.Supported {
		selects = append(selects, fmt.Sprintf("%q", "urn:alm:descriptor:com.tectonic.ui:select:"+v))
	}
	const csvMarker = "\t// +operator-sdk:csv:customresourcedefinitions:type=spec,"
	const defaultMarker = "\t// +kubebuilder:default="
	csv, def := false, false
	for i := at - 1; i >= 0 && strings.HasPrefix(lines[i], "\t//"); i-- {
		switch {
		case strings.HasPrefix(lines[i], csvMarker):
			head, _, ok := strings.Cut(lines[i], ",xDescriptors=")
			if !ok {
				head = lines[i]
			}
			lines[i] = head + ",xDescriptors={" + strings.Join(selects, ",") + "}"
			csv = true
		case strings.HasPrefix(lines[i], defaultMarker):
			lines[i] = defaultMarker + fmt.Sprintf("%q", versions.Default)
			def = true
		}
	}
	if !csv || !def {
		return "", fmt.Errorf("the Version field lacks its +operator-sdk:csv or +kubebuilder:default marker")
	}
	return strings.Join(lines, "\n"), nil
}
