package policy

import (
	"net/url"
	"strings"
)

// kubectl's part of the action-flag table (see flags.go). kubectl takes
// no abbreviations of its flags, so they match exactly.
//
// kubectlActs are the flags that change the identity, the credentials or
// the server kubectl acts with, that reach any API path, that write files,
// or that let kustomize run programs. A kubeconfig given with
// --kubeconfig can name an exec credential plugin, which kubectl runs.
var kubectlActs = []string{
	"kubeconfig", "token", "server", "as", "as-group", "as-uid", "user", "username", "password",
	"client-certificate", "client-key", "certificate-authority", "insecure-skip-tls-verify", "tls-server-name",
	"raw", "cache-dir", "log-file", "log-dir", "profile", "profile-output", "output-directory",
	"kustomize", "enable-alpha-plugins", "enable-exec", "enable-helm", "helm-command",
}

// kubectlActShort are the short forms: -s (--server), -k (--kustomize).
const kubectlActShort = "sk"

// kubectlArgLong are the flags that take a value as the next word; the
// short ones are in kubectlArgShort. -f is left out: it takes a value in
// get but not in logs, and a short flag is never guessed to take one.
var (
	kubectlArgLong = " namespace context cluster user kubeconfig server token as as-group as-uid certificate-authority " +
		"client-certificate client-key cache-dir request-timeout tls-server-name username password profile " +
		"profile-output log-file log-dir v vmodule output selector container field-selector sort-by tail since " +
		"since-time label-columns template filename raw kustomize output-directory chunk-size "
	kubectlArgShort = "noslcvLk"
)

// kubectlRuns are the subcommands that run programs, reach into pods or
// open ports; they are at most Ask.
var kubectlRuns = map[string]string{
	"exec": "runs a command in a container", "cp": "copies files through a container's tar",
	"port-forward": "opens a port into the cluster", "proxy": "opens a proxy to the API server",
	"debug": "starts a debugging container", "attach": "attaches to a running container",
	"run": "starts a pod", "plugin": "lists and runs plugins", "edit": "runs an editor",
}

// kubectlBuiltins are kubectl's own subcommands. Any other word runs the
// plugin kubectl-WORD found on PATH.
var kubectlBuiltins = map[string]bool{
	"annotate": true, "api-resources": true, "api-versions": true, "apply": true, "attach": true, "auth": true,
	"autoscale": true, "certificate": true, "cluster-info": true, "completion": true, "config": true,
	"cordon": true, "cp": true, "create": true, "debug": true, "delete": true, "describe": true, "diff": true,
	"drain": true, "edit": true, "events": true, "exec": true, "explain": true, "expose": true, "get": true,
	"help": true, "kustomize": true, "label": true, "logs": true, "options": true, "patch": true, "plugin": true,
	"port-forward": true, "proxy": true, "replace": true, "rollout": true, "run": true, "scale": true,
	"set": true, "taint": true, "top": true, "uncordon": true, "version": true, "wait": true,
}

// kubectlConfigReads are the kubectl config subcommands that only read.
var kubectlConfigReads = map[string]bool{
	"view": true, "current-context": true, "get-contexts": true, "get-clusters": true, "get-users": true,
}

// kubeResources maps every name kubectl accepts for a common resource
// (plural, singular, short names) to its plural, as kubectl reads them
// case-insensitively.
var kubeResources = func() map[string]string {
	m := map[string]string{}
	for _, names := range [][]string{
		{"pods", "pod", "po"}, {"services", "service", "svc"}, {"deployments", "deployment", "deploy"},
		{"replicasets", "replicaset", "rs"}, {"statefulsets", "statefulset", "sts"}, {"daemonsets", "daemonset", "ds"},
		{"jobs", "job"}, {"cronjobs", "cronjob", "cj"}, {"configmaps", "configmap", "cm"}, {"secrets", "secret"},
		{"serviceaccounts", "serviceaccount", "sa"}, {"namespaces", "namespace", "ns"}, {"nodes", "node", "no"},
		{"persistentvolumes", "persistentvolume", "pv"}, {"persistentvolumeclaims", "persistentvolumeclaim", "pvc"},
		{"events", "event", "ev"}, {"endpoints", "ep"}, {"endpointslices", "endpointslice"},
		{"ingresses", "ingress", "ing"}, {"ingressclasses", "ingressclass"},
		{"networkpolicies", "networkpolicy", "netpol"}, {"roles", "role"}, {"rolebindings", "rolebinding"},
		{"clusterroles", "clusterrole"}, {"clusterrolebindings", "clusterrolebinding"},
		{"storageclasses", "storageclass", "sc"}, {"customresourcedefinitions", "customresourcedefinition", "crd", "crds"},
		{"horizontalpodautoscalers", "horizontalpodautoscaler", "hpa"},
		{"poddisruptionbudgets", "poddisruptionbudget", "pdb"}, {"limitranges", "limitrange", "limits"},
		{"resourcequotas", "resourcequota", "quota"}, {"replicationcontrollers", "replicationcontroller", "rc"},
		{"podtemplates", "podtemplate"}, {"leases", "lease"}, {"priorityclasses", "priorityclass", "pc"},
		{"certificatesigningrequests", "certificatesigningrequest", "csr"}, {"componentstatuses", "componentstatus", "cs"},
		{"controllerrevisions", "controllerrevision"}, {"runtimeclasses", "runtimeclass"},
		{"volumeattachments", "volumeattachment"}, {"csidrivers", "csidriver"}, {"csinodes", "csinode"},
		{"mutatingwebhookconfigurations", "mutatingwebhookconfiguration"},
		{"validatingwebhookconfigurations", "validatingwebhookconfiguration"},
		{"validatingadmissionpolicies", "validatingadmissionpolicy"},
		{"validatingadmissionpolicybindings", "validatingadmissionpolicybinding"},
		{"apiservices", "apiservice"}, {"tokenreviews", "tokenreview"}, {"selfsubjectreviews", "selfsubjectreview"},
		{"skills", "skill", "sk"}, {"agents", "agent", "ag"}, {"commandpolicies", "commandpolicy", "cpol"},
		{"commandruns", "commandrun", "crun"},
	} {
		for _, n := range names {
			m[n] = names[0]
		}
	}
	return m
}()

// kubectl escalates the flags and subcommands of the table above, makes
// the forms that read objects from files at most Ask unless the rule names
// them (kubectl_objects.go), and returns the command's words as kubectl
// reads them, when they differ from the words as written, and as the verb
// a flag implies: the rules are matched against those too.
func (j *judge) kubectl(words []cword, pb *partBuilder) []variant {
	var buf [8]int
	var seen kflags
	sub, positional := -1, buf[:0]
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case w.kind != wStatic:
			if mayBeOption(w) {
				pb.add("kubectl has flags that change its credentials or run programs, and a word that is not known before the command runs could be one of them")
			}
			if sub < 0 {
				pb.add("kubectl's subcommand is not known before the command runs; an unknown one runs a plugin")
				return nil
			}
			continue
		case w.text == "--":
			i = len(words)
			continue
		case len(w.text) > 1 && w.text[0] == '-':
			i = kubectlFlag(words, i, pb, &seen)
			continue
		}
		if sub < 0 {
			sub = i
			kubectlSubcommand(words, i, pb)
			continue
		}
		positional = append(positional, i)
	}
	if sub < 0 {
		return nil
	}
	seen = seen.resolve(words[sub].text)
	kubectlObjects(seen, pb)
	variants := kubectlImplied(words, sub, positional, seen, pb)
	if len(positional) == 0 && !kubectlRaw(words) {
		return variants
	}
	for _, v := range kubectlVariants(words, positional) {
		variants = append(variants, variant{words: v, note: "as kubectl reads its resource names"})
	}
	return variants
}

// kubectlRaw reports whether a kubectl command has a --raw flag, whose
// path is read as kubectl sends it.
func kubectlRaw(words []cword) bool {
	for _, w := range words {
		if strings.HasPrefix(w.text, "--raw") {
			return true
		}
	}
	return false
}

// kubectlFlag escalates the flag at words[i], records it in seen and
// returns the index of its last word.
func kubectlFlag(words []cword, i int, pb *partBuilder, seen *kflags) int {
	t := words[i].text
	if strings.HasPrefix(t, "--") {
		name, value, hasValue := strings.Cut(t[2:], "=")
		seen.long(name, value, hasValue)
		if contains(kubectlActs, name) {
			pb.add("kubectl " + t + " changes kubectl's credentials, server or files, or reaches any API path")
		}
		if !hasValue && hasWord(kubectlArgLong, name) && i+1 < len(words) {
			return i + 1
		}
		return i
	}
	record := true
	for k := 1; k < len(t); k++ {
		c := t[k]
		if record {
			// what follows -f is its value, outside kubectl logs
			seen.short(c)
			record = c != 'f'
		}
		if strings.IndexByte(kubectlActShort, c) >= 0 {
			pb.add("kubectl " + t + " changes kubectl's server or runs kustomize")
		}
		if strings.IndexByte(kubectlArgShort, c) >= 0 {
			if k == len(t)-1 && i+1 < len(words) {
				return i + 1
			}
			return i
		}
	}
	return i
}

// kubectlSubcommand escalates the subcommands that run programs, write
// the kubeconfig or run plugins.
func kubectlSubcommand(words []cword, i int, pb *partBuilder) {
	name := words[i].text
	switch {
	case kubectlRuns[name] != "":
		pb.add("kubectl " + name + " " + kubectlRuns[name])
	case name == "config":
		if i+1 >= len(words) || words[i+1].kind != wStatic || !kubectlConfigReads[words[i+1].text] {
			pb.add("kubectl config can write the kubeconfig, whose users can run credential plugins")
		}
	case !kubectlBuiltins[name]:
		pb.add("kubectl " + name + " is not one of kubectl's commands: it runs the plugin kubectl-" + name)
	}
}

// kubectlVariants returns the words of a kubectl command as kubectl reads
// them, when they differ from the words as written: lowercase, resource
// names as their plural (SECRETS, Secret, secret.v1., sec as a short name
// where there is one: secrets), and a --raw path percent-decoded. A comma
// list (pods,secrets) or a TYPE/NAME word gives one variant per resource
// type, with that type as the first positional word and the names as
// words of their own, so that `kubectl get secrets *` and
// `kubectl get ** *secret* **` both see `kubectl get pods,secret/db`.
func kubectlVariants(words []cword, positional []int) [][]cword {
	changed := false
	var types []string
	for n, i := range positional {
		t := words[i].text
		if words[i].kind != wStatic {
			continue
		}
		if !strings.ContainsAny(t, ",/.ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			// the common case, a plain lowercase word: no allocation
			if canon := kubeResources[t]; n == 0 && canon != "" && canon != t {
				changed = true
				types = append(types, canon)
			}
			continue
		}
		for _, elem := range strings.Split(t, ",") {
			typ, _, named := strings.Cut(elem, "/")
			if n > 0 && !named {
				continue
			}
			canon := canonicalResource(typ)
			changed = changed || canon != typ || named || strings.Contains(t, ",")
			if canon != "" && !contains(types, canon) {
				types = append(types, canon)
			}
		}
		changed = changed || t != strings.ToLower(t)
	}
	if !changed && !kubectlRaw(words) {
		return nil
	}
	base, rawChanged := kubectlLower(words, positional)
	if !changed && !rawChanged {
		return nil
	}
	variants := [][]cword{base}
	if len(positional) == 0 || !strings.ContainsAny(words[positional[0]].text, ",/") && len(types) < 2 {
		// one type, written without a list or a name: base says it all
		return variants
	}
	first := positional[0]
	for _, typ := range types {
		v := make([]cword, 0, len(base)+1)
		v = append(v, base[:first]...)
		v = append(v, cword{text: typ})
		for k, w := range base[first:] {
			isPos := contains(positional, first+k)
			if !isPos || words[first+k].kind != wStatic {
				if k > 0 {
					v = append(v, w)
				}
				continue
			}
			for _, elem := range strings.Split(w.text, ",") {
				if _, name, named := strings.Cut(elem, "/"); named {
					v = append(v, cword{text: name})
				} else if k > 0 {
					v = append(v, cword{text: elem})
				}
			}
		}
		variants = append(variants, v)
	}
	return variants
}

// kubectlLower returns the words lowercased, with the resource types of
// the positional words as their plural and --raw paths decoded, and
// whether a --raw path changed.
func kubectlLower(words []cword, positional []int) ([]cword, bool) {
	out := make([]cword, len(words))
	rawChanged := false
	for i, w := range words {
		out[i] = w
		if w.kind != wStatic {
			continue
		}
		t := strings.ToLower(w.text)
		if i > 0 && (words[i-1].text == "--raw" || strings.HasPrefix(w.text, "--raw=")) {
			if d, err := url.PathUnescape(t); err == nil && d != t {
				t, rawChanged = strings.ToLower(d), true
			}
		} else if contains(positional, i) {
			t = canonicalWord(t)
		}
		out[i].text = t
	}
	return out, rawChanged
}

// canonicalWord rewrites the resource types of a positional word:
// pods,Secret/db is pods,secrets/db.
func canonicalWord(t string) string {
	if !strings.ContainsAny(t, ",/") {
		if canon := canonicalResource(t); canon != "" {
			return canon
		}
		return t
	}
	elems := strings.Split(t, ",")
	for k, elem := range elems {
		typ, name, named := strings.Cut(elem, "/")
		if canon := canonicalResource(typ); canon != "" {
			typ = canon
		}
		if named {
			elems[k] = typ + "/" + name
		} else {
			elems[k] = typ
		}
	}
	return strings.Join(elems, ",")
}

// canonicalResource returns the plural of a resource type as kubectl
// reads it (case-insensitive, resource.version.group), or the type itself,
// lowercased and without its version and group, when it is not in the
// table.
func canonicalResource(typ string) string {
	typ = strings.ToLower(typ)
	if dot := strings.IndexByte(typ, '.'); dot >= 0 {
		typ = typ[:dot]
	}
	if plural, ok := kubeResources[typ]; ok {
		return plural
	}
	return typ
}

// contains reports whether s holds v.
func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
