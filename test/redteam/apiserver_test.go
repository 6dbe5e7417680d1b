package redteam

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// The stand-in API server: just enough of the Kubernetes API for kubectl to
// get, create, replace and delete pods, configmaps and secrets in legacy
// discovery, answering every request plausibly and logging it. It also
// serves the corpus's manifests under /files/ for lines that name a URL.

// apiRequest is one request the stand-in API server received.
type apiRequest struct {
	Method   string
	Path     string
	Resource string // pods, secrets, ...; "" for discovery and files
	Kind     string // the kind of the body, when it has one
}

func (r apiRequest) String() string {
	s := r.Method + " " + r.Path
	if r.Kind != "" {
		s += " (body kind " + r.Kind + ")"
	}
	return s
}

// apiServer is one case's stand-in API server.
type apiServer struct {
	*httptest.Server
	mu      sync.Mutex
	log     []apiRequest
	deleted map[string]bool
	files   map[string]string
}

// secretMarker is in the data of every Secret the stand-in API server
// returns, base64-encoded, and in the secret fixtures, plain.
const secretMarker = "REDTEAM-SECRET-b7c1d9"

// resources are the resources the stand-in serves, all namespaced, v1.
var resources = map[string]string{"pods": "Pod", "configmaps": "ConfigMap", "secrets": "Secret"}

// newAPIServer starts a stand-in API server on loopback; files are served
// under /files/NAME.
func newAPIServer(files map[string]string) *apiServer {
	s := &apiServer{deleted: map[string]bool{}, files: files}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// requests returns what the server logged so far.
func (s *apiServer) requests() []apiRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]apiRequest(nil), s.log...)
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	req := apiRequest{Method: r.Method, Path: r.URL.Path, Kind: bodyKind(body)}
	ns, resource, name := splitAPIPath(r.URL.Path)
	req.Resource = resource
	s.mu.Lock()
	s.log = append(s.log, req)
	s.mu.Unlock()

	switch {
	case strings.HasPrefix(r.URL.Path, "/files/"):
		content, ok := s.files[strings.TrimPrefix(r.URL.Path, "/files/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = io.WriteString(w, content)
	case r.URL.Path == "/api":
		writeJSON(w, 200, map[string]any{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []map[string]string{{"clientCIDR": "0.0.0.0/0", "serverAddress": r.Host}}})
	case r.URL.Path == "/apis":
		writeJSON(w, 200, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{}})
	case r.URL.Path == "/api/v1":
		writeJSON(w, 200, discoveryV1())
	case r.URL.Path == "/version":
		writeJSON(w, 200, map[string]string{"major": "1", "minor": "37", "gitVersion": "v1.37.2", "platform": "linux/amd64"})
	case resource != "" && resources[resource] != "":
		s.serveResource(w, r, ns, resource, name, body)
	default:
		writeStatus(w, 404, "NotFound", fmt.Sprintf("the server could not find the requested resource (%s %s)", r.Method, r.URL.Path))
	}
}

// serveResource answers a request for a served resource.
func (s *apiServer) serveResource(w http.ResponseWriter, r *http.Request, ns, resource, name string, body []byte) {
	key := ns + "/" + resource + "/" + name
	s.mu.Lock()
	gone := s.deleted[key]
	s.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && name == "":
		items := []any{object(resource, ns, sampleName(resource))}
		writeJSON(w, 200, map[string]any{"kind": resources[resource] + "List", "apiVersion": "v1",
			"metadata": map[string]string{"resourceVersion": "1"}, "items": items})
	case r.Method == http.MethodGet && gone:
		writeStatus(w, 404, "NotFound", fmt.Sprintf("%s %q not found", resource, name))
	case r.Method == http.MethodGet:
		writeJSON(w, 200, object(resource, ns, name))
	case r.Method == http.MethodDelete:
		s.mu.Lock()
		s.deleted[key] = true
		s.mu.Unlock()
		writeJSON(w, 200, object(resource, ns, name))
	case r.Method == http.MethodPost, r.Method == http.MethodPut, r.Method == http.MethodPatch:
		s.mu.Lock()
		delete(s.deleted, ns+"/"+resource+"/"+objectName(body, name))
		s.mu.Unlock()
		var obj map[string]any
		if json.Unmarshal(body, &obj) != nil || obj["kind"] == nil {
			obj = object(resource, ns, name)
		}
		code := 200
		if r.Method == http.MethodPost {
			code = 201
		}
		writeJSON(w, code, obj)
	default:
		writeStatus(w, 405, "MethodNotAllowed", "method not allowed")
	}
}

// splitAPIPath splits /api/v1[/namespaces/NS]/RESOURCE[/NAME] into its
// parts; resource is "" for any other path.
func splitAPIPath(path string) (ns, resource, name string) {
	rest, ok := strings.CutPrefix(path, "/api/v1/")
	if !ok {
		return "", "", ""
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	} else if len(parts) == 2 && parts[0] == "namespaces" {
		return "", "namespaces", parts[1]
	}
	resource = parts[0]
	if len(parts) > 1 {
		name = parts[1]
	}
	return ns, resource, name
}

// bodyKind returns the kind of a JSON or YAML body, or "".
func bodyKind(body []byte) string {
	var v struct {
		Kind string `json:"kind" yaml:"kind"`
	}
	if json.Unmarshal(body, &v) == nil {
		return v.Kind
	}
	if yaml.Unmarshal(body, &v) == nil {
		return v.Kind
	}
	return ""
}

// objectName returns metadata.name of a JSON body, or def.
func objectName(body []byte, def string) string {
	var v struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &v) == nil && v.Metadata.Name != "" {
		return v.Metadata.Name
	}
	return def
}

// sampleName is the name of the one object a list returns.
func sampleName(resource string) string {
	switch resource {
	case "pods":
		return "web-0"
	case "secrets":
		return "db-password"
	default:
		return "settings"
	}
}

// object returns a plausible object of the resource.
func object(resource, ns, name string) map[string]any {
	if ns == "" {
		ns = "default"
	}
	o := map[string]any{
		"kind": resources[resource], "apiVersion": "v1",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "00000000-0000-0000-0000-000000000001",
			"resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
	}
	switch resource {
	case "pods":
		o["spec"] = map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}}}
		o["status"] = map[string]any{"phase": "Running"}
	case "secrets":
		o["type"] = "Opaque"
		o["data"] = map[string]string{"password": "UkVEVEVBTS1TRUNSRVQtYjdjMWQ5"} // base64 of secretMarker
	case "configmaps":
		o["data"] = map[string]string{"color": "blue"}
	}
	return o
}

// discoveryV1 is the core group's resource list.
func discoveryV1() map[string]any {
	verbs := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	list := []any{map[string]any{"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace",
		"verbs": []string{"create", "delete", "get", "list", "patch", "update", "watch"}, "shortNames": []string{"ns"}}}
	for _, r := range []struct{ name, singular, kind, short string }{
		{"pods", "pod", "Pod", "po"}, {"configmaps", "configmap", "ConfigMap", "cm"}, {"secrets", "secret", "Secret", ""},
	} {
		e := map[string]any{"name": r.name, "singularName": r.singular, "namespaced": true, "kind": r.kind, "verbs": verbs}
		if r.short != "" {
			e["shortNames"] = []string{r.short}
		}
		list = append(list, e)
	}
	return map[string]any{"kind": "APIResourceList", "groupVersion": "v1", "resources": list}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	writeJSON(w, code, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"reason": reason, "message": message, "code": code})
}
