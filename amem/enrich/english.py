"""English background frequencies for the offline keyword scorer: stop words and two tiers of
common words, hand-written for this package from general knowledge of English word frequency.

A word's *informativeness* is its weight in the scorer:

* ``STOPWORDS`` (function words, auxiliaries, pronouns, fillers of chat): 0, never a keyword;
* ``TIER1`` (roughly the few hundred most frequent content words: *time, people, good, think*):
  low weight, a keyword only when nothing better is there;
* ``TIER2`` (common but more specific: *house, money, school, problem*): medium weight;
* any other word: full weight (rare words tell notes apart; that is what keywords are for).
"""

from __future__ import annotations

STOPWORDS = frozenset("""
a about above across after afterwards again against ago ah all almost alone along already also
although always am among an and another any anybody anyhow anyone anything anyway anyways anywhere
are aren't around as at away be became because become becomes been before beforehand behind being
below beside besides between beyond both but by can can't cannot could couldn't did didn't do does
doesn't doing don't done down during each eg either else elsewhere enough etc even ever every
everybody everyone everything everywhere except few for from further had hadn't has hasn't have
haven't having he he'd he'll he's hence her here here's hers herself him himself his how how's
however i i'd i'll i'm i've ie if in indeed into is isn't it it'd it'll it's its itself just
let let's may maybe me might mine more moreover most mostly much must my myself namely neither
never nevertheless next no nobody none noone nor not nothing now nowhere of off often oh on once
one ones only onto or other others otherwise ought our ours ourselves out over own perhaps per
please quite rather re really same seem seemed seeming seems several shall she she'd she'll she's
should shouldn't since so some somebody somehow someone something sometime sometimes somewhat
somewhere still such than that that's the their theirs them themselves then thence there there's
thereafter thereby therefore therein these they they'd they'll they're they've this those though
through throughout thru thus to together too toward towards under unless until up upon us very via
was wasn't we we'd we'll we're we've were weren't what what's whatever when whence whenever where
where's whereas whereby wherever whether which while whither who who's whoever whole whom whose
why why's will with within without won't would wouldn't yet you you'd you'll you're you've your
yours yourself yourselves
get gets got gotten getting go goes going gone went come comes came coming make makes made making
say says said saying tell tells told take takes took taken put puts keep keeps kept let lets
thing things stuff lot lots kind sort bit yes yeah yep yup nope ok okay hey hi hello hmm huh lol
haha wow oops um uh gonna wanna gotta kinda sorta thanks thank cheers bye sorry congrats
definitely totally absolutely actually basically literally probably certainly surely anyway
today tomorrow yesterday tonight currently recently soon later earlier lately
instead via http https www com org html etc
near nearby beside
""".split())

TIER1 = frozenset("""
able add also amazing area around ask asked asking awesome away back bad believe best better big
call called came can case change child children city cool course day days different early end
even example experience eye face fact family far feel feeling feels felt find first friend friends
fun give given gives giving glad good great group guess hand happen happened happy hard hear heard
help high hold home hope house idea important interesting job keep know knew known large last late
leave left life like liked little live lived long look looked looking lose love loved lovely man
mean means meant men mind moment month months morning move much name need needed new nice night
number old open part people person place play point pretty problem put question read ready real
reason right room run saw school see seen sense set show side small sound sounds start started state
stay sure system talk talked team tell thanks think thinking thought time times tried try trying
turn understand use used using want wanted watch water way week weeks well woman women wonderful
word work worked working world wow year years young
previous following recent usual
january february march april june july august september october november december
monday tuesday wednesday thursday friday saturday sunday weekend
afternoon evening noon midnight dawn dusk hour hours minute minutes o'clock pm
""".split())

TIER2 = frozenset("""
account action activity age agree air allow answer appear apply approach art article ask attention
available baby bed begin behavior benefit bill black blue body book break bring brother build
building business buy car care carry center certain chance character check choice choose class
clear close cold color company compare complete concern condition consider continue control cost
country couple create culture cup current cut dark data daughter deal decide decision deep describe
design detail develop development difference difficult dinner direction discuss doctor dog door
draw dream drink drive during easy eat economy education effect effort energy enjoy enter environment
event evidence exactly expect explain fall father fear feature field fight figure file fill film
final fine finish fire floor focus follow food force form free front full future game garden general
goal green grow growth guy hair half happen head health heart heavy history hit hot hour human image
imagine include increase industry information inside interest issue item join key kid kids kitchen
land language law lead learn learned level light line list listen local lot low main maintain major
manage market matter meet meeting member memory message method middle miss modern money mother
movie music nature near nearly network news note notice office order organization outside page pain
paper parent parents particular party pass past pay peace period personal phone picture piece plan
plant policy political poor popular position possible power practice prepare present press price
private process produce product program project provide public pull purpose push quality quickly
quite race raise range rate reach realize receive record red reduce relationship remain remember
report research resource response rest result return review rich rise risk road rock role rule safe
save science sea season seat second security sell send series serve service share short shot sign
simple simply single sister site size skill social society son song space speak special spend sport
staff stage stand star step story street strong student study style subject success suggest summer
support table task teach teacher test thanks theory third top total touch town trade training travel
treat tree trip trouble true truth type unit value various view visit voice wait walk wall war ignore output input
watch weather white whole wife win window winter wish worry write writing wrong
""".split()) - TIER1

#: words that open a line like a speaker name ("Note: ...") but label the line, not a person
LABELS = frozenset("""
note notes update todo fixme warning error info summary question answer q a re fw subject title
topic task tip fact reminder decision idea
""".split())


def informativeness(word: str) -> float:
    """0 for a stop word, 0.35 for the most common content words, 0.65 for common ones, else 1."""
    lower = word.lower()
    if lower in STOPWORDS:
        return 0.0
    if lower in TIER1:
        return 0.35
    if lower in TIER2:
        return 0.65
    return 1.0

#: Common English verbs (base forms): a keyword names a thing, a person or a place, so a verb
#: never ends a keyword phrase or stands alone as one ("alice prefers", "join Google"). Their
#: inflections (prefers, preferred) come from :func:`_inflect`. For the verbs that are as often
#: nouns (``NOUN_TOO``: plan, work, love, visit, ...) only the past forms count (loved, visited).
VERB_BASES = frozenset("""
accept achieve admit adopt advise afford agree aim allow announce apologize appear appreciate
argue arrange arrive ask attend avoid bake become begin believe belong borrow bother bring build
buy call care carry catch celebrate choose claim collect come commit compare complain complete
consider continue convince cook count create cry decide deliver describe deserve destroy develop
die discover discuss do draw drink drive eat enjoy ensure enter escape expect experience explain
explore fail fall feel fetch fill find finish fit fix follow forget forgive gain gather get give go grab grow
guess hang happen hate have hear help hide hit hold hope hurt ignore imagine improve include
inspire intend introduce invite involve join jump keep kill knock know last laugh lead learn leave
lend let lie like listen live look lose love make manage marry mean meet mention mind miss move
need notice obtain offer open organize own participate pay pick plan play prefer prepare pretend
prevent promise protect prove provide publish pull push put quit raise reach read realize receive
recommend reduce refuse relax remain remember remind rent repeat replace reply require rest retire
return reveal ride ring rise run save say see seek seem sell send serve set shake share shoot show
shut sing sit sleep smell sound speak spend stand start stay steal stick stop study succeed suggest
support suppose surprise swim take talk teach tear tell tend thank think throw touch train travel
treat try turn understand use visit wait wake walk want warn wash watch wear win wish wonder work
worry write
break close crash delete deploy depend expire freeze install migrate overheat reboot renew
restart rotate update upgrade
""".split())

NOUN_TOO = frozenset("""
break close crash deploy update upgrade
call care experience fall help hit hope lie love plan play rest return ring rise run share
show sound start study support surprise talk touch train travel visit walk watch wish work
claim cook count drink escape fit fix guess hate laugh lead mind need offer pick promise rent
reply ride set smell swim use wait wash
""".split())

_IRREGULAR = {
    "be": "am is are was were been being", "begin": "began begun", "bring": "brought",
    "break": "broke broken", "build": "built", "buy": "bought", "freeze": "froze frozen", "catch": "caught", "choose": "chose chosen",
    "come": "came", "do": "did done does", "draw": "drew drawn", "drink": "drank drunk",
    "drive": "drove driven", "eat": "ate eaten", "fall": "fell fallen", "feel": "felt",
    "find": "found", "forget": "forgot forgotten", "forgive": "forgave forgiven",
    "get": "got gotten", "give": "gave given", "go": "went gone goes", "grow": "grew grown",
    "hang": "hung", "run": "ran", "show": "showed shown", "lie": "lay lain", "have": "had has", "hear": "heard", "hide": "hid hidden", "hold": "held",
    "keep": "kept", "know": "knew known", "lead": "led", "leave": "left", "lend": "lent",
    "lose": "lost", "make": "made", "mean": "meant", "meet": "met", "pay": "paid",
    "quit": "quit", "ride": "rode ridden", "ring": "rang rung", "rise": "rose risen", "say": "said",
    "see": "saw seen", "seek": "sought", "sell": "sold", "send": "sent", "shake": "shook shaken",
    "shoot": "shot", "sing": "sang sung", "sit": "sat", "sleep": "slept", "speak": "spoke spoken",
    "spend": "spent", "stand": "stood", "steal": "stole stolen", "stick": "stuck",
    "swim": "swam swum", "take": "took taken", "teach": "taught", "tear": "tore torn",
    "tell": "told", "think": "thought", "throw": "threw thrown", "understand": "understood",
    "wake": "woke woken", "wear": "wore worn", "win": "won", "write": "wrote written",
}


def _inflect(base: str) -> set[str]:
    """A verb's forms but the gerund (prefer -> prefers, preferred; irregular pasts too).

    The ``-ing`` form is left out: as a keyword it is mostly a noun (reading, hiking, meeting).
    """
    forms = {base}
    forms.add(base + "es" if base.endswith(("s", "sh", "ch", "x", "z", "o")) else
              base[:-1] + "ies" if base.endswith("y") and base[-2:-1] not in "aeiou" else base + "s")
    stem = base[:-1] if base.endswith("e") and not base.endswith("ee") else base
    if len(base) >= 3 and base[-1] not in "aeiouwxy" and base[-2] in "aeiou" and base[-3] not in "aeiou":
        forms.add(base + base[-1] + "ed")  # stop -> stopped
    forms.add(base[:-1] + "ied" if base.endswith("y") and base[-2:-1] not in "aeiou" else stem + "ed")
    forms.update(_IRREGULAR.get(base, "").split())
    return forms


#: every form of every verb in ``VERB_BASES``, and the chat's linking verbs whose base is as
#: often a noun ("that sounds great", "it looks fun")
VERBS = frozenset(form for base in VERB_BASES for form in _inflect(base)
                  if base not in NOUN_TOO or form not in (base, base + "s", base + "es")
                  ) | frozenset("sounds looks feels".split())
#: the forms of the ``NOUN_TOO`` verbs that are nouns as often (love, loves, plans)
NOUN_VERB_FORMS = frozenset(f for b in NOUN_TOO for f in (b, b + "s", b + "es"))
#: words after which an ambiguous form is the verb ("I love", "she plans")
SUBJECTS = frozenset("i you he she it we they who".split())


def is_verb(word: str) -> bool:
    """Whether ``word`` (any case) is a form of a common English verb (see ``VERB_BASES``)."""
    return word.lower().replace("’", "'") in VERBS
