package main

import (
	"strings"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

func TestRewriteWritesTheSupportedVersions(t *testing.T) {
	src := strings.Join([]string{
		"type EtcdClusterSpec struct {",
		"\t// Version is the etcd version to run.",
		"\t// +kubebuilder:default=\"3.0.0\"",
		"\t// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName=\"etcd Version\",xDescriptors={\"urn:alm:descriptor:com.tectonic.ui:text\"}",
		field,
		"}",
	}, "\n")
	out, err := rewrite(src)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "+kubebuilder:default=\""+versions.Default+"\"\n") {
		t.Errorf("default not rewritten:\n%s", out)
	}
	for _, v := range versions.Supported {
		if !strings.Contains(out, "\"urn:alm:descriptor:com.tectonic.ui:select:"+v+"\"") {
			t.Errorf("no select for %s:\n%s", v, out)
		}
	}
	if strings.Contains(out, "com.tectonic.ui:text") || !strings.Contains(out, `displayName="etcd Version",xDescriptors={`) {
		t.Errorf("marker not replaced in place:\n%s", out)
	}
	again, _ := rewrite(out)
	if again != out {
		t.Error("rewrite is not idempotent")
	}
	if _, err := rewrite("type X struct{}"); err == nil {
		t.Error("a file without the field should be an error")
	}
}
