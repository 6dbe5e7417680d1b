#!/usr/bin/env bash
# Estimates the monthly cost of each namespace from pod requests and PVC
# capacity. Usage: cost-by-namespace.sh [CPU_HOUR] [GIB_HOUR] [DISK_GIB_MONTH]
# Prices default to the examples in references/pricing.md. Reads only.
set -euo pipefail

cpu_hour="${1:-0.034}"
mem_hour="${2:-0.0045}"
disk_month="${3:-0.08}"

# CPU in cores and memory in GiB, from Kubernetes quantities.
quantities='
  def cpu: if . == null then 0
           elif endswith("m") then (.[:-1] | tonumber) / 1000
           else tonumber end;
  def mem: if . == null then 0 else
             (capture("^(?<n>[0-9.]+)(?<u>[A-Za-z]*)$") // {n: ., u: ""}) as $q
             | ($q.n | tonumber) * ({"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                                    "Ki": 1024, "Mi": 1048576, "Gi": 1073741824,
                                    "Ti": 1099511627776}[$q.u] // 1) / 1073741824
           end;
'

pods="$(kubectl get pods -A --field-selector=status.phase=Running -o json | jq -r "$quantities"'
  .items[]
  | [.spec.containers[].resources.requests // {}] as $main
  | [.spec.initContainers[]?.resources.requests // {}] as $init
  | ([$main[].cpu | cpu] | add // 0) as $cpu
  | ([$main[].memory | mem] | add // 0) as $mem
  | ([$init[].cpu | cpu] | max // 0) as $icpu
  | ([$init[].memory | mem] | max // 0) as $imem
  | [.metadata.namespace,
     ([$cpu, $icpu] | max), ([$mem, $imem] | max),
     (if ($main | map(length) | add) == 0 then 1 else 0 end)]
  | @tsv')"

pvcs="$(kubectl get pvc -A -o json | jq -r "$quantities"'
  .items[] | select(.status.phase == "Bound")
  | [.metadata.namespace, (.status.capacity.storage | mem)] | @tsv')"

{
  printf '%s\n' "$pods" | awk -F'\t' 'NF { print "pod\t" $0 }'
  printf '%s\n' "$pvcs" | awk -F'\t' 'NF { print "pvc\t" $0 }'
} | awk -F'\t' -v ch="$cpu_hour" -v mh="$mem_hour" -v dm="$disk_month" '
  $1 == "pod" { cpu[$2] += $3; mem[$2] += $4; bare[$2] += $5; ns[$2] = 1 }
  $1 == "pvc" { disk[$2] += $3; ns[$2] = 1 }
  END {
    print "namespace,cpu_cores,memory_gib,storage_gib,cpu_cost,memory_cost,storage_cost,total_cost,pods_without_requests"
    for (n in ns) {
      c = cpu[n] * ch * 730; m = mem[n] * mh * 730; d = disk[n] * dm
      printf "%s,%.2f,%.2f,%.1f,%.2f,%.2f,%.2f,%.2f,%d\n", n, cpu[n], mem[n], disk[n], c, m, d, c + m + d, bare[n]
    }
  }' | { IFS= read -r header; echo "$header"; sort -t, -k8,8nr; }
