"""The `wave-cre` track's fine-tuning learners: the lower and upper bounds and a rehearsal method.

Each fine-tunes a copy of the encoder and the MLP classifier (`learners.Classifier`) with Adam. It
trains the encoder's top `layers` transformer layers, or all of them. The embedding table stays
frozen, so the markers keep their vectors. The encoder trains at `encoder_lr` and the head at
`optimisation.lr`, with dropout off. The default profile trains the top 2 of MiniLM's 6 layers.
Backward then stops there, which makes a CPU step much cheaper.

`finetune` is sequential fine-tuning, the lower bound. It trains each task in turn, with
cross-entropy over every relation seen so far, and keeps nothing.

`joint` is the upper bound. It trains once on every task's sentences, and is evaluated after the
last task.

`rehearsal` is the replay of RP-CRE (Cui et al., ACL 2021, Sec. 3) and CRL (Zhao et al., Findings
of ACL 2022, Sec. 3.3). It leaves out their prototype networks and contrastive losses. After
training on the task, it keeps a memory of K real sentences per new relation. They are chosen by
k-means on the encoder's features: the sentence nearest each of K centroids. As in their code, this
is scikit-learn's KMeans with random_state 0. It then trains on the memory of every seen relation.
K = 10, as in RP-CRE; CRL's code uses 20. It keeps the sentences' wordpiece ids, which `kept()`
counts."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import torch
from torch.nn import functional as F

from benchmarks.tracks.common.learners import masked
from benchmarks.tracks.wave.learners import Classifier, Optimisation, RelationData, RelationLearner
from benchmarks.tracks.wave.relations import RelationTask


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    optimisation: Optimisation = Optimisation(epochs=10, lr=1e-3, batch_size=32)  # the head's rate
    encoder_lr: float = 1e-5
    layers: int | None = None  # the top layers trained; None: every transformer layer
    memory_per_relation: int = 10  # rehearsal only
    replay: Optimisation = Optimisation(epochs=10, lr=1e-3, batch_size=32)  # rehearsal's training on memory


class Finetune(RelationLearner):
    def __init__(self, data: RelationData, config: FinetuneConfig, seed: int):
        super().__init__(data, seed)
        self.config = config
        self.encoder = copy.deepcopy(data.encoder)
        blocks = list(self.encoder.bert.encoder.layer)
        for block in blocks[-config.layers:] if config.layers is not None else blocks:
            block.requires_grad_(True)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.classifier = Classifier(data.feature_dim, data.relations)

    def _train(self, index, optimisation: Optimisation) -> None:
        data = self.data
        trainable = [p for p in self.encoder.parameters() if p.requires_grad]
        groups = [{"params": trainable, "lr": self.config.encoder_lr}, {"params": list(self.classifier.parameters())}]

        def loss(batch: np.ndarray) -> torch.Tensor:
            features = self.encoder(*self.tokens(batch))
            return F.cross_entropy(masked(self.classifier(features), self.seen), data.labels[batch])

        self.train_steps(groups, optimisation, index, loss)

    def learn(self, task_index: int, task: RelationTask) -> None:
        self.begin(task_index, task)
        self._train(task.train, self.config.optimisation)

    def predict(self, index) -> tuple[torch.Tensor, None]:
        features = self.encode(index, encoder=self.encoder)
        with torch.no_grad():
            return masked(self.classifier(features), self.seen).argmax(1), None


class Joint(Finetune):
    """Trained once, after the last task arrives, on every task's sentences."""

    final_only = True

    def __init__(self, data: RelationData, config: FinetuneConfig, seed: int):
        super().__init__(data, config, seed)
        self.pending: list[int] = []

    def learn(self, task_index: int, task: RelationTask) -> None:
        self.begin(task_index, task)
        self.pending += list(task.train)
        if self.learned == self.data.tasks:
            self._train(self.pending, self.config.optimisation)


def nearest_to_centroids(features: np.ndarray, count: int) -> list[int]:
    """Rows of `features` nearest each of `count` k-means centroids (all rows when there are fewer)."""
    from sklearn.cluster import KMeans

    if len(features) <= count:
        return list(range(len(features)))
    centroids = KMeans(n_clusters=count, random_state=0, n_init=10).fit(features).cluster_centers_
    chosen: list[int] = []
    for centroid in centroids:
        order = np.argsort(((features - centroid) ** 2).sum(1))
        chosen.append(int(next(i for i in order if i not in chosen)))
    return chosen


class Rehearsal(Finetune):
    def __init__(self, data: RelationData, config: FinetuneConfig, seed: int):
        super().__init__(data, config, seed)
        self.memory: list[int] = []

    def learn(self, task_index: int, task: RelationTask) -> None:
        super().learn(task_index, task)
        train = np.asarray(task.train)
        features = self.encode(train, encoder=self.encoder).cpu().numpy()
        labels = self.data.labels[train].cpu().numpy()
        for relation in task.classes:
            rows = np.flatnonzero(labels == relation)
            self.memory += [int(train[rows[i]]) for i in
                            nearest_to_centroids(features[rows], self.config.memory_per_relation)]
        if task_index > 0:
            self._train(self.memory, self.config.replay)

    def kept(self) -> dict[str, int]:
        return {"stored_sentences": self.data.bank.stored_bytes(self.memory)}
