package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// object is one Kubernetes object, as parsed YAML.
type object map[string]any

// get walks a path of map keys and list indexes.
func (o object) get(path ...any) any {
	var cur any = map[string]any(o)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	return cur
}

func (o object) kind() string { s, _ := o.get("kind").(string); return s }
func (o object) name() string { s, _ := o.get("metadata", "name").(string); return s }

// loadManifests parses every document of every file in kubernetes/.
func loadManifests(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var out []object
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var o object
			if err := yaml.UnmarshalStrict(doc, &o); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			if o.kind() == "" || o.name() == "" || o.get("apiVersion") == nil {
				t.Fatalf("%s, document %d: no apiVersion, kind or name", f, i+1)
			}
			out = append(out, o)
		}
	}
	return out
}

func find(t *testing.T, objects []object, kind, name string) object {
	t.Helper()
	for _, o := range objects {
		if o.kind() == kind && o.name() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the manifests", kind, name)
	return nil
}

// podSpec is the pod template's spec of a workload.
func podSpec(o object) object {
	if o.kind() == "CronJob" {
		spec, _ := o.get("spec", "jobTemplate", "spec", "template", "spec").(map[string]any)
		return spec
	}
	spec, _ := o.get("spec", "template", "spec").(map[string]any)
	return spec
}

// container is one container of a pod spec.
type container struct {
	Name  string
	Image string
	Args  []string
	Env   []envVar
	Ports []struct {
		Name          string
		ContainerPort int `json:"containerPort"`
	}
	Resources struct {
		Limits map[string]string
	}
	VolumeMounts []struct {
		Name      string
		MountPath string `json:"mountPath"`
	} `json:"volumeMounts"`
}

type envVar struct {
	Name      string
	Value     string
	ValueFrom *struct {
		SecretKeyRef *struct{ Name, Key string } `json:"secretKeyRef"`
		FieldRef     *struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
		ResourceFieldRef *struct {
			ContainerName string `json:"containerName"`
			Resource      string
			Divisor       string
		} `json:"resourceFieldRef"`
	} `json:"valueFrom"`
}

func containers(t *testing.T, spec object) []container {
	t.Helper()
	raw, err := yaml.Marshal(spec.get("containers"))
	if err != nil {
		t.Fatal(err)
	}
	var out []container
	if err := yaml.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// flagName is the name of a command-line argument "-name=value", or "".
func flagName(arg string) string {
	if !strings.HasPrefix(arg, "-") {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name
}

// secretValue is a key of a Secret of the manifests.
func secretValue(t *testing.T, objects []object, name, key string) string {
	t.Helper()
	s := find(t, objects, "Secret", name)
	v, ok := s.get("stringData", key).(string)
	if !ok {
		t.Fatalf("Secret %s has no key %s", name, key)
	}
	return v
}

// expand substitutes $(VAR) as the kubelet does in args.
func expand(arg string, env map[string]string) string {
	for k, v := range env {
		arg = strings.ReplaceAll(arg, fmt.Sprintf("$(%s)", k), v)
	}
	return arg
}
