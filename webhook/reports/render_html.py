"""report.html: one self-contained page (inline CSS and SVG, a CSP of ``default-src 'none'``).

Rendered by Jinja2 with autoescaping from ``templates/report.html.j2``; the first 200 denials and
errors are listed (report.json and report.csv have them all). MLPS 2.0 assessors read Chinese:
headings and labels are in Chinese, English or both (``reports.language``, default both), the
control names as GB/T 22239-2019 words them (``mlps``), and the CSS names fonts that carry CJK.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import jinja2

from .renderer import FinishedHour, Renderer

# English label -> Chinese, for the page's headings, table heads and cards.
LABELS = {
    "vgate compliance report": "vgate 合规报告",
    "Summary": "摘要",
    "Decisions over the hour": "本小时的决策",
    "Violations by rule and severity": "按规则和严重级别的违规",
    "MLPS 2.0 (等保2.0) control coverage": "等保2.0 控制点覆盖",
    "Denials": "拒绝的请求",
    "Errors": "出错的请求",
    "Exceptions used": "使用的例外",
    "Integrity": "完整性",
    "rule": "规则",
    "severity": "严重级别",
    "control": "控制点",
    "denied": "拒绝",
    "warned": "警告",
    "audited": "审计",
    "excepted": "例外",
    "enforced by": "执行规则",
    "violations / findings": "违规 / 发现",
    "time": "时间",
    "user": "用户",
    "reason": "原因",
    "endpoint": "端点",
    "request": "请求",
    "outcome": "结果",
    "exception": "例外",
    "justification": "理由",
    "approver": "批准人",
    "ticket": "工单",
    "expires": "到期",
    "rules excepted (uses)": "例外的规则(使用次数)",
    "decisions": "决策",
    "dry runs": "试运行",
    "integrity": "完整性",
    "allowed": "允许",
    "mutated": "已修改",
    "error": "错误",
    "unknown": "未知",
    "Scheduling compliance": "调度合规",
    "When vgate was up": "运行时段",
    "State at the hour's close": "现存状态（本小时结束时）",
    "No snapshot was taken": "未获取现存状态",
    "Where every sensitive workload runs, and on what, listed from the cluster at":
        "每个敏感工作负载的运行位置与节点属性，读取自集群，时间",
    "objects judged against the current policies": "个对象按现行策略评估",
    "refused by them": "个被拒绝",
    "taints": "污点",
    "egress": "出站",
    "none": "无",
    "Running objects the current policies refuse": "现行策略拒绝的运行中对象",
    "object": "对象",
    "reasons": "原因",
    "Drift: node facts changed under running sensitive pods": "漂移：运行中敏感工作负载所在节点的属性被更改",
    "first seen": "首次发现",
    "what changed": "变更内容",
    "by": "操作者",
    "up": "运行",
    "minutes": "分钟",
    "heartbeats": "次心跳",
    "replicas": "个副本",
    "not up (no heartbeat, no decision)": "未运行时段（无心跳、无决策）",
    "No record of vgate running in this hour: no heartbeat and no decision (an outage, or vgate not running).":
        "本小时无 vgate 运行记录：无心跳、无决策（中断，或 vgate 未运行）。",
    "Where sensitive workloads ran: every binding judged against the node at the moment it was placed.":
        "敏感工作负载的实际运行位置:每次绑定均在调度时对照节点进行校验。",
    "bindings allowed": "允许的绑定",
    "bindings refused": "拒绝的绑定",
    "sensitive pods placed": "已放置的敏感 Pod",
    "sensitive bindings refused": "拒绝的敏感绑定",
    "pod or node not yet known": "Pod 或节点尚未可知",
    "zones": "可用区",
    "zone": "可用区",
    "compliant": "合规",
    "not compliant": "不合规",
    "pod": "Pod",
    "node": "节点",
    "bound at": "绑定时间",
    "verified at binding": "绑定时校验",
    "not placed": "未放置",
    "memory encryption": "内存加密",
    "set by": "设置者",
    "no external network": "无外部网络",
    "confined by": "受限于",
    "not confined": "未受限",
    "not computed": "未计算",
    "PodGroup zones": "PodGroup 可用区",
    "node taints": "节点污点",
    "more": "更多",
    "No sensitive pod was bound or refused in this hour.": "本小时没有敏感 Pod 被绑定或拒绝。",
}


def render_html(document: dict[str, Any], denials: list[dict[str, Any]], errors: list[dict[str, Any]],
                language: str = "both") -> str:
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    source = resources.files("webhook.reports") / "templates" / "report.html.j2"
    template = environment.from_string(source.read_text())
    peak = max([sum(m.values()) for m in document["perMinute"]] + [1])
    return template.render(report=document, denials=denials, errors=errors, peak=peak, t=_translator(language),
                           lang="en" if language == "en" else "zh-CN")


def _translator(language: str) -> Any:
    def t(label: str) -> str:
        chinese = LABELS.get(label, label)  # a decision name vgate does not know stays as it is
        return {"en": label, "zh-CN": chinese}.get(language, f"{chinese} · {label}")
    return t


class HtmlRenderer(Renderer):
    """report.html: the totals, and the first ``LISTED`` denials and errors (report.json has them all)."""

    files = ("report.html",)
    LISTED = 200

    def finish(self, hour: FinishedHour) -> None:
        html = render_html(hour.document, list(hour.listed("denials", self.LISTED)),
                           list(hour.listed("errors", self.LISTED)), hour.language)
        self.out.write("report.html", html.encode())
