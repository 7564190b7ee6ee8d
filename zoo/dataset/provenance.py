"""Where a zoo's rows come from: each data set's license and citation, each family's paper.

There is one table per kind, read by the dataset card (`zoo.dataset.card`). A checkpoint trained on a
data set is published under that data set's terms (the Hub's `license` field). That is the conservative
reading. The card points back at the data set (`source_datasets`). It also cites the paper whose zoo a
family reproduces.

A data set or family without an entry gets `license: unknown` and no citation in its card. A test checks
that every registered data source and family has one.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DataSetFacts:
    pretty_name: str
    license: str  # a Hub license id; "other" when the data set has no standard license
    source_id: str  # the Hub's id of the data set (source_datasets: extended|<id>)
    bibtex: str
    license_name: str | None = None  # for "other": a slug the Hub shows
    license_link: str | None = None  # for "other": where the terms are
    terms: str = ""  # one line for the card's License section


@dataclasses.dataclass(frozen=True)
class FamilyFacts:
    reference_zoo: str
    task_category: str  # from the Hub's list; see TASK_CATEGORY_WHY
    member: str
    differences: str  # what differs from the reference zoo (from the family module and spec comments)
    bibtex: tuple[str, ...]


MNIST_BIBTEX = """@article{lecun1998gradient,
  title   = {Gradient-Based Learning Applied to Document Recognition},
  author  = {LeCun, Yann and Bottou, L{\\'e}on and Bengio, Yoshua and Haffner, Patrick},
  journal = {Proceedings of the IEEE},
  volume  = {86},
  number  = {11},
  pages   = {2278--2324},
  year    = {1998}
}"""
FASHION_MNIST_BIBTEX = """@article{xiao2017fashion,
  title   = {Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning Algorithms},
  author  = {Xiao, Han and Rasul, Kashif and Vollgraf, Roland},
  journal = {arXiv preprint arXiv:1708.07747},
  year    = {2017}
}"""
CIFAR10_BIBTEX = """@techreport{krizhevsky2009learning,
  title       = {Learning Multiple Layers of Features from Tiny Images},
  author      = {Krizhevsky, Alex},
  institution = {University of Toronto},
  year        = {2009}
}"""
SVHN_BIBTEX = """@inproceedings{netzer2011reading,
  title     = {Reading Digits in Natural Images with Unsupervised Feature Learning},
  author    = {Netzer, Yuval and Wang, Tao and Coates, Adam and Bissacco, Alessandro and Wu, Bo and Ng, Andrew Y.},
  booktitle = {NIPS Workshop on Deep Learning and Unsupervised Feature Learning},
  year      = {2011}
}"""
AG_NEWS_BIBTEX = """@inproceedings{zhang2015character,
  title     = {Character-level Convolutional Networks for Text Classification},
  author    = {Zhang, Xiang and Zhao, Junbo and LeCun, Yann},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year      = {2015}
}"""

_CIFAR10 = dict(license="other", license_name="cifar-10", license_link="https://www.cs.toronto.edu/~kriz/cifar.html",
                source_id="uoft-cs/cifar10", bibtex=CIFAR10_BIBTEX,
                terms="no formal license; its authors ask that the technical report be cited")
_SVHN = dict(license="other", license_name="svhn-non-commercial",
             license_link="http://ufldl.stanford.edu/housenumbers/",
             source_id="ufldl-stanford/svhn", bibtex=SVHN_BIBTEX,
             terms="non-commercial use only, citing the paper (the data set's page)")
_AG_NEWS = dict(license="other", license_name="ag-news-non-commercial",
                license_link="http://groups.di.unipi.it/~gulli/AG_corpus_of_news_articles.html",
                source_id="fancyzhx/ag_news", bibtex=AG_NEWS_BIBTEX,
                terms="AG's corpus: research and non-commercial use only")

# keyed by the spec's `dataset.name` (zoo.data.images.SOURCES and zoo.data.text.TEXT_SOURCES)
DATA_SETS: dict[str, DataSetFacts] = {
    "mnist": DataSetFacts("MNIST", "cc-by-sa-3.0", "ylecun/mnist", MNIST_BIBTEX,
                          terms="Creative Commons Attribution-Share Alike 3.0"),
    "fashion_mnist": DataSetFacts("Fashion-MNIST", "mit", "zalando-datasets/fashion_mnist", FASHION_MNIST_BIBTEX,
                                  terms="MIT"),
    "cifar10": DataSetFacts("CIFAR-10", **_CIFAR10),
    "cifar10_gs": DataSetFacts("CIFAR-10 (grayscale)", **_CIFAR10),
    "cifar100": DataSetFacts("CIFAR-100", **{**_CIFAR10, "license_name": "cifar-100", "source_id": "uoft-cs/cifar100"}),
    "svhn_gs": DataSetFacts("SVHN (grayscale)", **_SVHN),
    "ag_news": DataSetFacts("AG News", **_AG_NEWS),
    "ag_news_7600": DataSetFacts("AG News (7,600 test articles, re-split)", **_AG_NEWS),
}

UNTERTHINER_BIBTEX = """@article{unterthiner2020predicting,
  title   = {Predicting Neural Network Accuracy from Weights},
  author  = {Unterthiner, Thomas and Keysers, Daniel and Gelly, Sylvain and Bousquet, Olivier and Tolstikhin, Ilya},
  journal = {arXiv preprint arXiv:2002.11448},
  year    = {2020}
}"""
SCHUERHOLT_BIBTEX = """@inproceedings{schurholt2022model,
  title     = {Model Zoos: A Dataset of Diverse Populations of Neural Network Models},
  author    = {Sch{\\"u}rholt, Konstantin and Taskiran, Diyar and Knyazev, Boris and Gir{\\'o}-i-Nieto, Xavier and Borth, Damian},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
  year      = {2022}
}"""  # noqa: E501 (a BibTeX record, published as written)
TRAN_BIBTEX = """@inproceedings{tran2025equivariant,
  title     = {Equivariant Neural Functional Networks for Transformers},
  author    = {Tran, Viet-Hoang and Vo, Thieu N. and The, An Nguyen and Tran Huu, Tho and Nguyen-Nhat, Minh-Khoi and Tran, Thanh and Pham, Duy-Tung and Nguyen, Tan Minh},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2025}
}"""  # noqa: E501 (a BibTeX record, published as written)
SITZMANN_BIBTEX = """@inproceedings{sitzmann2020implicit,
  title     = {Implicit Neural Representations with Periodic Activation Functions},
  author    = {Sitzmann, Vincent and Martel, Julien N. P. and Bergman, Alexander W. and Lindell, David B. and Wetzstein, Gordon},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year      = {2020}
}"""  # noqa: E501 (a BibTeX record, published as written)
ZHOU_BIBTEX = """@inproceedings{zhou2023permutation,
  title     = {Permutation Equivariant Neural Functionals},
  author    = {Zhou, Allan and Yang, Kaien and Burns, Kaylee and Cardace, Adriano and Jiang, Yiding and Sokota, Samuel and Kolter, J. Zico and Finn, Chelsea},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year      = {2023}
}"""  # noqa: E501 (a BibTeX record, published as written)
NAVON_BIBTEX = """@inproceedings{navon2023equivariant,
  title     = {Equivariant Architectures for Learning in Deep Weight Spaces},
  author    = {Navon, Aviv and Shamsian, Aviv and Achituve, Idan and Fetaya, Ethan and Chechik, Gal and Maron, Haggai},
  booktitle = {International Conference on Machine Learning (ICML)},
  year      = {2023}
}"""
KALOGEROPOULOS_BIBTEX = """@inproceedings{kalogeropoulos2024scale,
  title     = {Scale Equivariant Graph Metanetworks},
  author    = {Kalogeropoulos, Ioannis and Bouritsas, Giorgos and Panagakis, Yannis},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year      = {2024}
}"""
TRAN_MONOMIAL_BIBTEX = """@inproceedings{tran2024monomial,
  title     = {Monomial Matrix Group Equivariant Neural Functional Networks},
  author    = {Tran, Viet-Hoang and Vo, Thieu N. and Tran, Tho H. and Nguyen, An T. and Nguyen, Tan M.},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year      = {2024}
}"""
NFNZOO_BIBTEX = """@software{nfnzoo,
  title = {nfnzoo: model-zoo datasets and benchmarks for neural functional networks},
  note  = {Software that generated this dataset; cite the version in the card's header},
  year  = {2025}
}"""

# The Hub has no weight-space category. A row is a fixed-length numeric vector (the weights,
# one architecture per config) plus scalar targets in other columns, which is what the Hub's
# tabular tasks describe: regression for predicting a member's accuracy from its weights,
# classification for predicting an INR's image class.
TASK_CATEGORY_WHY = ("the Hub has no weight-space task; a row is a fixed-length weight vector plus scalar "
                     "targets, so accuracy prediction is tabular regression and INR classification is tabular "
                     "classification")

FAMILIES: dict[str, FamilyFacts] = {
    "cnn": FamilyFacts(
        reference_zoo="the Small CNN Zoo (Unterthiner et al. 2020)",
        task_category="tabular-regression",
        member="three 3x3 convolutions of 16 channels with stride 2, global average pooling, a dense layer",
        differences=("\"best\" checkpoints and any selection use a validation split held out of the training "
                     "data, never the test set; hyperparameters are sampled from the paper's Table 1 ranges by a "
                     "seeded sampler; every random draw comes from an explicit per-run generator."),
        bibtex=(UNTERTHINER_BIBTEX,)),
    "transformer": FamilyFacts(
        reference_zoo="the Small Transformer Zoo (Tran et al., ICLR 2025)",
        task_category="tabular-regression",
        member="a 2-block, 2-head transformer encoder of width 32 and a linear classifier",
        differences=("the \"best\" checkpoint is picked on a validation split held out of the training data (the "
                     "released code picked it on the test set); train fractions are seeded random subsets; one "
                     "training seed; the positional encoding is not stored; AG News uses MiniLM's input "
                     "embeddings reduced by PCA instead of word2vec, title + description, masked padding, and "
                     "4 output classes (the released AG News sweeps pass n_classes: 10, so their AG News "
                     "checkpoints may carry a 10-way output layer, 17,962 parameters instead of 17,764). As in "
                     "the reference, each epoch's last partial batch is dropped (training.drop_last)."),
        bibtex=(TRAN_BIBTEX,)),
    "inr": FamilyFacts(
        reference_zoo="the INR data sets of Zhou et al. 2023 (NFN) and Navon et al. 2023 (DWSNets)",
        task_category="tabular-classification",
        member="a SIREN (Sitzmann et al. 2020) 2 -> 32 -> 32 -> channels with sine layers, omega_0 = 30",
        differences=("SIREN's image-fitting recipe with a fixed step count (the references ship weights, not "
                     "their steps); the same split points over all train and test images for every image set; "
                     "each fit starts from its own seeded initialization; no augmented copies (augment in "
                     "weight space with zoo.symmetry)."),
        bibtex=(SITZMANN_BIBTEX, ZHOU_BIBTEX, NAVON_BIBTEX)),
    "pooled_cnn": FamilyFacts(
        reference_zoo="the Model Zoos (Schürholt et al., NeurIPS 2022 Datasets and Benchmarks)",
        task_category="tabular-regression",
        member=("small CNNs with max pooling: conv 8@5x5, pool, conv 6@5x5, pool, conv 4@2x2, flatten 36 -> 20 -> "
                "10 (2,464 parameters on MNIST), or the larger CNN-l; each pool before its activation"),
        differences=("import-only: the members are the published checkpoints, read from their Ray Tune trial "
                     "folders (`nfnzoo import model-zoos`); nfnzoo trains none, and recomputes only the test "
                     "metrics (the reference's validation images are its own seeded split of the training set)."),
        bibtex=(SCHUERHOLT_BIBTEX,)),
}

