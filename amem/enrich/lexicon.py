"""The category lexicon: a few telling words per category and topic, in English and Chinese.

Used by the offline enricher to pick a category (the one with most hits, General when none)
and topics (the topics with hits). English entries are matched against the note's normalised
word keys (lower-cased, plural ``s`` stripped, see :func:`amem.enrich.keywords.word_key`), so
list them singular and lower-case; multi-word entries match as phrases. CJK entries match as
substrings. Small on purpose: a wrong category is worse than General.
"""

from __future__ import annotations

#: category -> topic -> terms
LEXICON: dict[str, dict[str, tuple[str, ...]]] = {
    "Technical": {
        "programming": (
            "code", "coding", "python", "javascript", "typescript", "java", "rust", "golang", "c++", "sql",
            "function", "bug", "debug", "compile", "compiler", "api", "library", "framework", "refactor",
            "git", "commit", "repository", "repo", "unit test", "pytest", "stack trace", "exception",
            "代码", "编程", "程序", "函数", "调试", "接口", "コード", "プログラミング", "코드", "프로그래밍",
        ),
        "infrastructure": (
            "server", "database", "docker", "kubernetes", "linux", "deploy", "deployment", "cloud", "aws",
            "latency", "cache", "cluster", "container", "network", "http", "endpoint", "postgres", "sqlite",
            "qdrant", "index", "query", "backend", "frontend",
            "服务器", "数据库", "部署", "缓存", "集群", "网络", "サーバー", "데이터베이스", "서버",
        ),
        "ai": (
            "llm", "embedding", "neural", "transformer", "gpu", "inference", "fine-tune", "fine-tuning",
            "prompt engineering", "machine learning", "deep learning", "vector", "tokenizer", "onnx",
            "人工智能", "机器学习", "深度学习", "大模型", "向量", "人工知能", "인공지능",
        ),
    },
    "Business": {
        "finance": (
            "revenue", "profit", "budget", "invoice", "pricing", "cost", "investor", "investment", "funding",
            "sale", "tax", "payment", "valuation", "stock", "share price", "accounting",
            "收入", "利润", "预算", "发票", "投资", "融资", "财务", "売上", "予算", "매출", "예산",
        ),
        "commerce": (
            "customer", "client", "contract", "vendor", "supplier", "marketing", "market", "startup",
            "company", "business", "competitor", "partnership", "negotiation", "b2b", "saas", "brand",
            "客户", "合同", "市场", "营销", "公司", "创业", "顾客", "顧客", "会社", "고객", "회사",
        ),
    },
    "Personal": {
        "family": (
            "mom", "dad", "mother", "father", "sister", "brother", "husband", "wife", "son", "daughter",
            "kid", "child", "parent", "grandma", "grandmother", "grandpa", "family", "wedding", "baby",
            "家人", "妈妈", "爸爸", "孩子", "老婆", "老公", "家族", "가족", "엄마", "아빠",
        ),
        "hobbies": (
            "hiking", "painting", "paint", "guitar", "piano", "music", "concert", "camping", "garden",
            "gardening", "cooking", "recipe", "movie", "novel", "book", "reading", "photography", "yoga",
            "running", "marathon", "swimming", "travel", "vacation", "trip", "beach", "pottery", "dance",
            "爬山", "画画", "音乐", "旅行", "做饭", "电影", "读书", "跑步", "趣味", "旅行", "여행", "취미",
        ),
        "wellbeing": (
            "doctor", "health", "sick", "therapy", "therapist", "anxiety", "stress", "sleep", "exercise",
            "diet", "birthday", "friend", "friendship", "relationship", "dating", "pet", "dog", "cat",
            "support group", "mental health", "feeling", "emotion",
            "健康", "医生", "朋友", "生日", "宠物", "心情", "健康", "友達", "건강", "친구",
        ),
    },
    "Project": {
        "planning": (
            "deadline", "milestone", "roadmap", "sprint", "backlog", "ticket", "task", "timeline",
            "deliverable", "release", "launch", "kickoff", "scope", "requirement", "spec", "estimate",
            "standup", "retrospective", "jira", "project", "plan", "status update",
            "项目", "进度", "截止", "里程碑", "需求", "排期", "上线", "プロジェクト", "締め切り", "프로젝트", "마감",
        ),
    },
    "Research": {
        "science": (
            "paper", "study", "experiment", "hypothesis", "dataset", "benchmark", "evaluation", "survey",
            "analysis", "result", "finding", "literature", "citation", "arxiv", "journal", "thesis",
            "baseline", "ablation", "statistical", "sample size", "methodology", "researcher", "research",
            "论文", "实验", "研究", "数据集", "假设", "基准", "論文", "実験", "研究", "논문", "실험", "연구",
        ),
    },
    "System": {
        "configuration": (
            "config", "configuration", "setting", "preference", "environment variable", "path", "install",
            "installation", "upgrade", "version", "permission", "credential", "token limit", "system prompt",
            "instruction", "tool call", "agent", "assistant", "memory store", "log level", "cron", "schedule",
            "配置", "设置", "偏好", "安装", "权限", "系统", "設定", "설정", "시스템",
        ),
    },
}

#: fixed order: breaks ties between categories deterministically (earlier wins)
CATEGORY_ORDER = ("Technical", "Research", "Project", "Business", "Personal", "System")
