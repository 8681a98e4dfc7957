{{/* The labels of every object: deploy/base's, and Helm's. */}}
{{- define "driftback.labels" -}}
app.kubernetes.io/name: driftback
app.kubernetes.io/part-of: driftback
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The selector: the base's. */}}
{{- define "driftback.selector" -}}
app.kubernetes.io/name: driftback
{{- end -}}

{{- define "driftback.image" -}}
{{- if hasPrefix "sha256:" .Values.image.tag -}}
{{ .Values.image.repository }}@{{ .Values.image.tag }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}
