{{/*
The chart's name, or nameOverride.
*/}}
{{- define "agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The Agent's name, and the prefix of the other objects' names:
fullnameOverride, else the release name, so that `helm install ops` makes
the Agent ops. It names the agent's Service agent-NAME, hence at most 57
characters.
*/}}
{{- define "agent.fullname" -}}
{{- $name := default .Release.Name .Values.fullnameOverride }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,55}[a-z0-9])?$" $name) }}
{{- fail (printf "the agent's name %q (the release name, or fullnameOverride) must be a DNS label of at most 57 characters" $name) }}
{{- end }}
{{- $name }}
{{- end }}

{{/*
The chart label: name and version.
*/}}
{{- define "agent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "agent.labels" -}}
helm.sh/chart: {{ include "agent.chart" . }}
app.kubernetes.io/name: {{ include "agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubeskills
{{- end }}

{{/*
The name of the CommandPolicy the Agent answers to: policy.name, else the
Agent's name when the chart makes the policy; empty when there is none.
*/}}
{{- define "agent.policyName" -}}
{{- if .Values.policy.create }}
{{- default (include "agent.fullname" .) .Values.policy.name }}
{{- else }}
{{- .Values.policy.name }}
{{- end }}
{{- end }}

{{/*
compact returns a copy of a map without its empty values: "", null, empty
lists and maps, and false. Numbers, zero included, are kept.
*/}}
{{- define "agent.compact" -}}
{{- $out := dict }}
{{- range $k, $v := . }}
{{- if or (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "int" $v) (not (empty $v)) }}
{{- $_ := set $out $k $v }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The Skills the chart makes, as a YAML list of {name, labels?, spec}: the
inline ones of skills.inline, then those of files/skills/NAME/SKILL.md.
*/}}
{{- define "agent.skills" -}}
{{- $skills := list }}
{{- range $i, $s := .Values.skills.inline }}
{{- $name := required (printf "skills.inline[%d].name is required" $i) $s.name }}
{{- $spec := dict "description" (required (printf "skills.inline[%d].description is required" $i) $s.description) }}
{{- $_ := set $spec "instructions" (required (printf "skills.inline[%d].instructions is required" $i) $s.instructions) }}
{{- range $k := list "license" "compatibility" "allowedTools" "metadata" "invocation" "files" }}
{{- with index $s $k }}
{{- $_ := set $spec $k . }}
{{- end }}
{{- end }}
{{- $skills = append $skills (dict "name" $name "labels" ($s.labels | default dict) "spec" $spec) }}
{{- end }}
{{- if .Values.skills.fromFiles }}
{{- range $path, $_ := .Files.Glob "files/skills/*/SKILL.md" }}
{{- $skills = append $skills (include "agent.fileSkill" (dict "Files" $.Files "path" $path) | fromYaml) }}
{{- end }}
{{- end }}
{{- $seen := dict }}
{{- range $skills }}
{{- if hasKey $seen .name }}
{{- fail (printf "the skill %s is defined twice (skills.inline and files/skills)" .name) }}
{{- end }}
{{- $_ := set $seen .name true }}
{{- end }}
{{- toYaml (dict "skills" $skills) }}
{{- end }}

{{/*
fileSkill reads the skill of files/skills/NAME/SKILL.md and the files beside
it into {name, spec}. The front matter keys read are name, description,
license, compatibility, allowed-tools, metadata and
disable-model-invocation; others are dropped.
*/}}
{{- define "agent.fileSkill" -}}
{{- $dir := dir .path }}
{{- $name := base $dir }}
{{- $raw := .Files.Get .path }}
{{- $parts := regexSplit "(?m)^---[ \t]*\r?$" $raw 3 }}
{{- if or (ne (len $parts) 3) (ne (trim (index $parts 0)) "") }}
{{- fail (printf "%s must start with YAML front matter between two '---' lines" .path) }}
{{- end }}
{{- $fm := index $parts 1 | fromYaml }}
{{- if hasKey $fm "Error" }}
{{- fail (printf "%s: the front matter is not valid YAML: %s" .path $fm.Error) }}
{{- end }}
{{- if and $fm.name (ne (toString $fm.name) $name) }}
{{- fail (printf "%s: name is %s in the front matter but the folder is %s" .path $fm.name $name) }}
{{- end }}
{{- $spec := dict "description" (required (printf "%s: description is required in the front matter" .path) $fm.description | toString) }}
{{- $_ := set $spec "instructions" (regexReplaceAll "^(\r?\n)+" (index $parts 2) "") }}
{{- with $fm.license }}{{ $_ := set $spec "license" (toString .) }}{{ end }}
{{- with $fm.compatibility }}{{ $_ := set $spec "compatibility" (toString .) }}{{ end }}
{{- with (index $fm "allowed-tools") }}
{{- if kindIs "slice" . }}
{{- $_ := set $spec "allowedTools" . }}
{{- else }}
{{- $_ := set $spec "allowedTools" (regexFindAll "[^\\s,()]+(\\([^)]*\\))?" (toString .) -1) }}
{{- end }}
{{- end }}
{{- with $fm.metadata }}
{{- $metadata := dict }}
{{- range $k, $v := . }}{{ $_ := set $metadata $k (toString $v) }}{{ end }}
{{- $_ := set $spec "metadata" $metadata }}
{{- end }}
{{- if eq (toString (index $fm "disable-model-invocation")) "true" }}
{{- $_ := set $spec "invocation" "Explicit" }}
{{- end }}
{{- $files := list }}
{{- range $path, $_ := .Files.Glob (printf "%s/**" $dir) }}
{{- $rel := trimPrefix (printf "%s/" $dir) $path }}
{{- if ne $rel "SKILL.md" }}
{{- $content := $.Files.Get $path }}
{{- $file := dict "path" $rel }}
{{- if contains "\x00" $content }}
{{- $_ := set $file "binaryContent" ($content | b64enc) }}
{{- else }}
{{- $_ := set $file "content" $content }}
{{- end }}
{{- if hasPrefix "scripts/" $rel }}
{{- $_ := set $file "executable" true }}
{{- end }}
{{- $files = append $files $file }}
{{- end }}
{{- end }}
{{- with $files }}
{{- $_ := set $spec "files" . }}
{{- end }}
{{- toYaml (dict "name" $name "spec" $spec) }}
{{- end }}
