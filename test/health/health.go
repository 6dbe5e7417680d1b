// Package health runs the Argo CD health checks of docs/argocd against
// kubeskills objects the way Argo CD runs a resource health customization:
// the object, converted to a Lua table, is the global obj, and the script
// returns a table with a status and a message.
package health

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Where the checks live, relative to the repository root, in Argo CD's
// resource customization layout: <Dir>/<Group>/<Kind>/health.lua, beside
// health_test.yaml and its testdata.
const (
	Dir          = "docs/argocd/health"
	Group        = "kubeskills.io"
	ScriptFile   = "health.lua"
	TestCaseFile = "health_test.yaml"
)

// Kinds are the kinds that have a health check.
var Kinds = []string{"Skill", "Agent", "CommandPolicy", "CommandRun", "SkillRepository"}

// The health statuses Argo CD knows.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// scriptTimeout bounds one run of a script, as Argo CD bounds its own.
const scriptTimeout = time.Second

// Status is what a health check says about an object.
type Status struct {
	// Status is one of the health statuses Argo CD knows.
	Status string `json:"status"`
	// Message tells why.
	Message string `json:"message,omitempty"`
}

// TestFile is a kind's health_test.yaml in Argo CD's format.
type TestFile struct {
	Tests []TestCase `json:"tests"`
}

// TestCase is the health status expected of the object at InputPath,
// relative to the kind's directory.
type TestCase struct {
	HealthStatus Status `json:"healthStatus"`
	InputPath    string `json:"inputPath"`
}

// KindDir is the directory of a kind's check under the repository root.
func KindDir(root, kind string) string {
	return filepath.Join(root, Dir, Group, kind)
}

// ReadTests reads a kind's health_test.yaml; unknown fields are errors.
func ReadTests(kindDir string) (*TestFile, error) {
	path := filepath.Join(kindDir, TestCaseFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	tf := &TestFile{}
	if err := yaml.UnmarshalStrict(data, tf); err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", path, err)
	}
	return tf, nil
}

// ReadObject reads a Kubernetes object from a YAML file, with integers as
// int64 as the API machinery decodes them.
func ReadObject(path string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", path, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("failed to decode %s: %w", path, err)
	}
	return u, nil
}

// Check runs a health script against an object's content. Only Lua's base,
// table, string and math libraries are open, and the script must finish
// within a second.
func Check(ctx context.Context, script []byte, obj map[string]any) (Status, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return Status{}, fmt.Errorf("failed to open Lua library %q: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, scriptTimeout)
	defer cancel()
	L.SetContext(ctx)

	value, err := toLua(L, obj)
	if err != nil {
		return Status{}, err
	}
	L.SetGlobal("obj", value)
	if err := L.DoString(string(script)); err != nil {
		return Status{}, fmt.Errorf("failed to run the health script: %w", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return Status{}, errors.New("the health script returned no table")
	}
	return readStatus(hs)
}

// readStatus reads the table a health script returns.
func readStatus(hs *lua.LTable) (Status, error) {
	var st Status
	switch s := hs.RawGetString("status").(type) {
	case lua.LString:
		st.Status = string(s)
	default:
		return st, fmt.Errorf("hs.status is a %s, not a string", s.Type())
	}
	switch st.Status {
	case Healthy, Progressing, Degraded, Suspended, Missing, Unknown:
	default:
		return st, fmt.Errorf("hs.status %q is not a health status Argo CD knows", st.Status)
	}
	switch m := hs.RawGetString("message").(type) {
	case lua.LString:
		st.Message = string(m)
	case *lua.LNilType:
	default:
		return st, fmt.Errorf("hs.message is a %s, not a string", m.Type())
	}
	return st, nil
}

// toLua converts unstructured content to Lua values: objects and lists
// become tables (lists indexed from 1), numbers become Lua numbers.
func toLua(L *lua.LState, v any) (lua.LValue, error) {
	switch v := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(v), nil
	case string:
		return lua.LString(v), nil
	case int64:
		return lua.LNumber(v), nil
	case int:
		return lua.LNumber(v), nil
	case float64:
		return lua.LNumber(v), nil
	case map[string]any:
		t := L.CreateTable(0, len(v))
		for k, e := range v {
			lv, err := toLua(L, e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		t := L.CreateTable(len(v), 0)
		for i, e := range v {
			lv, err := toLua(L, e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			t.RawSetInt(i+1, lv)
		}
		return t, nil
	}
	return nil, fmt.Errorf("cannot convert a %T to Lua", v)
}
