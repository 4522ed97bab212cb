{{/* Names, labels and the values every template shares. */}}

{{- define "vgate.labels" -}}
app.kubernetes.io/name: vgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: vgate
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "vgate.selector" -}}
app.kubernetes.io/name: vgate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vgate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The exempt namespaces: the value's list and the release's own namespace, sorted, once. */}}
{{- define "vgate.exempt" -}}
{{- append .Values.exemptNamespaces .Release.Namespace | uniq | sortAlpha | toJson -}}
{{- end }}

{{- define "vgate.anchorClaim" -}}
{{- .Values.reportWriter.anchor.existingClaim | default "vgate-report-anchor" -}}
{{- end }}

{{- define "vgate.auditClaim" -}}
{{- .Values.audit.existingClaim | default "vgate-audit" -}}
{{- end }}

{{/* The gateway config: the `config` value, with what the chart decides written in. */}}
{{- define "vgate.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $_ := set $config "exemptNamespaces" (include "vgate.exempt" . | fromJsonArray) -}}
{{- $_ := set $config "exceptions" (merge (dict "dir" "/etc/vgate/exceptions") (get $config "exceptions" | default dict)) -}}
{{- $_ := set $config "audit" (merge (dict "dir" "/app/audit") (get $config "audit" | default dict)) -}}
{{- $_ := set $config "reports" (merge (dict "dir" "/app/reports" "key" "/app/keys/report-ed25519.key" "anchorFile" "/app/anchor/reports-anchor.jsonl") (get $config "reports" | default dict)) -}}
{{- if .Values.mtls.clientCASecret -}}
{{- $_ := set $config "server" (merge (dict "clientCA" "/etc/vgate/client-ca/ca.crt") (get $config "server" | default dict)) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end }}

{{/* Both webhook configurations skip the exempt namespaces and those labelled vgate.io/exempt=true. */}}
{{- define "vgate.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ include "vgate.exempt" . }}
    - key: vgate.io/exempt
      operator: NotIn
      values: ["true"]
{{- end }}

{{- define "vgate.webhookClient" -}}
clientConfig:
  {{- if .root.Values.webhooks.url }}
  url: {{ printf "%s%s" (trimSuffix "/" .root.Values.webhooks.url) .path | quote }}
  {{- else }}
  service:
    name: vgate
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- end }}
  {{- if not .root.Values.certManager.enabled }}
  caBundle: {{ .root.Values.tls.caBundle | default "Cg==" }}
  {{- end }}
{{- end }}

{{- define "vgate.webhookAnnotations" -}}
{{- if .Values.certManager.enabled }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/vgate-serving
{{- end }}
{{- end }}

{{/* A policy file's path as a ConfigMap key: "security-seccomp/policy.rego" -> "security-seccomp.policy.rego". */}}
{{- define "vgate.policyKey" -}}
{{- . | replace "/" "." -}}
{{- end }}

{{- define "vgate.policyFiles" -}}
{{- $files := dict -}}
{{- if .Values.policies.fromChart -}}
{{- range $path, $_ := .Files.Glob "policies/**.rego" -}}
{{- if not (hasSuffix "_test.rego" $path) -}}
{{- $_ := set $files (trimPrefix "policies/" $path) ($.Files.Get $path) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $path, $text := .Values.policies.extra -}}
{{- $_ := set $files $path $text -}}
{{- end -}}
{{- toJson $files -}}
{{- end }}

{{- define "vgate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "vgate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end }}
