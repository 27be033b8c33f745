"""An LLM agent: one of the paper's prompting strategies over a backend, invalid answers counted.

Each round the agent answers two queries: the literal-ToM prediction of the partner's action and
its own action. Non-social strategies ask the prediction in a separate query that does not enter
the acting context; ``social_*`` strategies ask it first and append it to the acting context.
Scored strategies (``lm``, ``social_lm``) rank every action name as a continuation by summed
token log-probability (``lm_decoding: score``; ties -> first action) or generate greedily and
parse (``lm_decoding: greedy``). An unparseable answer, or an endpoint that fails after its
bounded retries, is an *invalid* answer: the agent plays a uniformly random action and flags it
(the runner applies ``invalid_policy``); an invalid prediction is a uniform distribution.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from icml25.core.chat import ChatError
from icml25.pipelines.functional_tom.games import Game
from icml25.pipelines.functional_tom.partners import PartnerFSM
from icml25.pipelines.functional_tom.prompts import (
    build_prompt,
    completion_prompt,
    describe_partner,
    parse_final_action,
    parse_first_action,
    parse_strategy,
)


class LLMAgent:
    def __init__(self, backend: Any, strategy: str, temperature: float = 0.0,
                 max_new_tokens: int = 32, lm_decoding: str = "score",
                 max_history_rounds: int | None = None) -> None:
        self.backend, self.strategy = backend, parse_strategy(strategy)
        self.name = f"llm:{strategy}"
        if self.strategy.scored and lm_decoding == "score" and not backend.supports_logprob:
            raise ValueError(f"strategy {strategy} scores continuations; this backend gives no "
                             "log-probabilities")
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.lm_decoding, self.max_history_rounds = lm_decoding, max_history_rounds

    def reset(self, game: Game, horizon: int, rng: np.random.Generator,
              partner: PartnerFSM | None = None) -> None:
        self.game, self.horizon, self.rng = game, horizon, rng
        self.history: list[tuple[int, int, float]] = []
        self.partner_text = describe_partner(game, partner.spec) if partner is not None else None
        self.step_info: dict[str, Any] = {}
        self.prediction: int | None = None
        self.truncated_rounds = 0

    # --- one query -----------------------------------------------------------------------
    def _scores(self, question: str, prediction: str | None) -> np.ndarray:
        prompt, truncated = completion_prompt(self.game, self.horizon, self.history,
                                              self.strategy, question, self.max_history_rounds,
                                              prediction)
        self.truncated_rounds += truncated
        return np.array([self.backend.logprob(prompt, " " + name) for name in self.game.actions])

    def _ask(self, question: str, prediction: str | None) -> tuple[int | None, str]:
        """(parsed action or None, raw text) of one query; endpoint failures are invalid."""
        try:
            if self.strategy.scored and self.lm_decoding == "score":
                scores = self._scores(question, prediction)
                return int(np.argmax(scores)), " ".join(f"{s:.3f}" for s in scores)
            if self.strategy.scored:
                prompt, _ = completion_prompt(self.game, self.horizon, self.history,
                                              self.strategy, question, self.max_history_rounds,
                                              prediction)
                messages = [{"role": "user", "content": prompt}]
            else:
                system, user, truncated = build_prompt(
                    self.game, self.horizon, self.history, self.strategy, question,
                    self.partner_text, self.max_history_rounds, prediction)
                self.truncated_rounds += truncated
                messages = [{"role": "system", "content": system},
                            {"role": "user", "content": user}]
            text = self.backend.generate(messages, n=1, temperature=self.temperature,
                                         max_tokens=self.max_new_tokens)[0]
        except ChatError as err:
            return None, f"<endpoint failure: {err}>"
        parse = parse_final_action if self.strategy.base.startswith("cot") and \
            question == "act" else parse_first_action
        return parse(text, self.game), text

    # --- agent protocol ----------------------------------------------------------------
    def predict(self) -> np.ndarray:
        n = self.game.n_actions
        b, raw = self._ask("predict", None)
        self.step_info = {"invalid_prediction": b is None, "raw_prediction": raw}
        self.prediction = b
        if b is None:
            return np.full(n, 1.0 / n)
        out = np.full(n, 0.02 / n)
        out[b] += 0.98
        return out

    def act(self) -> int:
        pred = None
        if self.strategy.social and self.prediction is not None:
            pred = self.game.actions[self.prediction]
        a, raw = self._ask("act", pred)
        invalid = a is None
        if invalid:
            a = int(self.rng.integers(self.game.n_actions))
        self.step_info.update({"invalid": invalid, "raw": raw})
        return int(a)

    def observe(self, a: int, b: int, r: float) -> None:
        self.history.append((a, b, r))


class EndpointError(RuntimeError):
    """The configured LLM endpoint cannot be used (its probe failed); raised before any
    episode is played."""


PROBE = [{"role": "user", "content": "Reply with the single word OK."}]


def probe_endpoint(llm: Mapping[str, Any], credentials: Mapping[str, Any] | None = None) -> str:
    """Send one request, without retries, to the ``openai`` backend's endpoint and return its
    reply; :class:`EndpointError` naming the endpoint if it does not answer (unreachable, HTTP
    error, timeout, an answer without text) or if its credentials are incomplete."""
    from icml25.core.chat import ChatClient

    creds = _endpoint_credentials(llm, credentials)
    try:
        client = ChatClient.from_credentials(creds, timeout_s=llm["timeout_s"], max_retries=0,
                                             backoff_s=0.0)
        return client.complete(PROBE, temperature=0.0, max_tokens=4)
    except (ChatError, ValueError) as err:
        raise EndpointError(
            f"functional_tom.llm: the endpoint {creds.get('base_url')!r} (model "
            f"{creds.get('model')!r}; credentials entry functional_tom_llm, or "
            f"functional_tom.llm.base_url/model) failed its probe request, so no LLM episode "
            f"was played: {err}") from None


def _endpoint_credentials(llm: Mapping[str, Any], credentials: Mapping[str, Any] | None
                          ) -> dict[str, Any]:
    creds = dict(credentials or {})
    if llm.get("base_url"):
        creds["base_url"] = llm["base_url"]
    if llm.get("model"):
        creds["model"] = llm["model"]
    return creds


def make_backend(llm: Mapping[str, Any], credentials: Mapping[str, Any] | None = None,
                 tiny_model_dir: str | None = None):
    """The configured backend: ``hf`` (local folder), ``hf_tiny`` (a tiny random stand-in built
    by the pipeline), ``openai`` (an OpenAI-compatible endpoint from Kedro credentials)."""
    kind = llm["backend"]
    if kind == "hf":
        from icml25.pipelines.functional_tom.llm_backends import HFBackend

        return HFBackend.from_pretrained(llm["model_path"], device=llm.get("device", "cpu"))
    if kind == "hf_tiny":
        from icml25.pipelines.functional_tom.llm_backends import HFBackend

        return HFBackend.from_pretrained(tiny_model_dir)
    if kind == "openai":
        from icml25.core.chat import ChatClient
        from icml25.pipelines.functional_tom.llm_backends import ChatEndpointBackend

        creds = _endpoint_credentials(llm, credentials)
        client = ChatClient.from_credentials(creds, timeout_s=llm["timeout_s"],
                                             max_retries=llm["max_retries"],
                                             backoff_s=llm["backoff_s"])
        return ChatEndpointBackend(client)
    raise ValueError(f"functional_tom.llm.backend: {kind!r} has no backend")
