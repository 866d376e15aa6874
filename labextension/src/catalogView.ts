/**
 * The catalog browser panel: a search box, a refresh button, an error line and the tree.
 *
 * It draws `CatalogModel.rows()` as a flat list (indented by depth) and redraws on every model
 * change; clicks and keys call the model. Stable hooks for tests and styles:
 * `.uc-CatalogBrowser` (the panel, id `uc-jupyter-catalog`), `.uc-CatalogBrowser-search`,
 * `.uc-CatalogBrowser-refresh`, `.uc-CatalogBrowser-error`, `.uc-CatalogTree` and its rows
 * `.uc-CatalogTree-item` (`data-uc-id`, `data-uc-kind`, `data-uc-name`, `data-uc-readable`,
 * `aria-expanded`) and `.uc-CatalogTree-message` (`data-uc-message` = loading|error|empty|truncated).
 */
import { caretDownIcon, caretRightIcon, refreshIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { CatalogModel, copyText, isExpandable, ITreeNode, Row } from './catalogModel';
import { catalogIcon, iconFor } from './icons';

export const ITEM_CLASS = 'uc-CatalogTree-item';

export class CatalogBrowser extends Widget {
  readonly model: CatalogModel;
  private readonly searchInput: HTMLInputElement;
  private readonly errorLine: HTMLElement;
  private readonly tree: HTMLElement;
  private readonly stopListening: () => void;
  private started = false;

  constructor(model: CatalogModel) {
    super();
    this.model = model;
    this.id = 'uc-jupyter-catalog';
    this.addClass('uc-CatalogBrowser');
    this.title.icon = catalogIcon;
    this.title.caption = 'Unity Catalog';

    const toolbar = document.createElement('div');
    toolbar.className = 'uc-CatalogBrowser-toolbar';
    const heading = document.createElement('span');
    heading.className = 'uc-CatalogBrowser-heading';
    heading.textContent = 'Unity Catalog';
    this.searchInput = document.createElement('input');
    this.searchInput.type = 'search';
    this.searchInput.className = 'uc-CatalogBrowser-search jp-mod-styled';
    this.searchInput.placeholder = 'Filter loaded names';
    this.searchInput.setAttribute('aria-label', 'Filter loaded names');
    this.searchInput.addEventListener('input', () => this.model.setFilter(this.searchInput.value));
    const refresh = document.createElement('button');
    refresh.type = 'button';
    refresh.className = 'uc-CatalogBrowser-refresh jp-ToolbarButtonComponent jp-mod-minimal jp-Button';
    refresh.title = 'Refresh the catalog';
    refresh.setAttribute('aria-label', 'Refresh the catalog');
    refreshIcon.element({ container: refresh, elementPosition: 'center', height: '16px', width: '16px' });
    refresh.addEventListener('click', () => void this.model.refresh());
    const top = document.createElement('div');
    top.className = 'uc-CatalogBrowser-header';
    top.append(heading, refresh);
    toolbar.append(top, this.searchInput);

    this.errorLine = document.createElement('div');
    this.errorLine.className = 'uc-CatalogBrowser-error';
    this.errorLine.setAttribute('role', 'alert');

    this.tree = document.createElement('ul');
    this.tree.className = 'uc-CatalogTree';
    this.tree.setAttribute('role', 'tree');
    this.tree.addEventListener('click', event => this.onClick(event));
    this.tree.addEventListener('keydown', event => this.onKey(event));
    // Right-click selects the row first, so context-menu commands act on it.
    this.tree.addEventListener('contextmenu', event => {
      const node = this.nodeOf(event.target);
      if (node) {
        this.model.select(node);
      }
    });

    this.node.append(toolbar, this.errorLine, this.tree);
    this.stopListening = this.model.onChange(() => this.render());
    this.render();
  }

  /** The catalogs are listed when the panel is first shown, not before. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    if (!this.started) {
      this.started = true;
      void this.model.refresh();
    }
  }

  dispose(): void {
    this.stopListening();
    super.dispose();
  }

  /** The tree node drawn by the row that holds `target`, if any. */
  nodeOf(target: EventTarget | null): ITreeNode | null {
    const row = target instanceof Element ? target.closest(`.${ITEM_CLASS}`) : null;
    const id = row?.getAttribute('data-uc-id');
    return id ? this.model.find(id) : null;
  }

  /** Draws the model as it is now. */
  render(): void {
    const model = this.model;
    this.errorLine.textContent = model.error ?? '';
    this.errorLine.hidden = model.error === null;
    this.node.setAttribute('data-uc-loading', String(model.loading));

    const rows = model.rows();
    const focusedId = document.activeElement?.closest(`.${ITEM_CLASS}`)?.getAttribute('data-uc-id');
    const items = rows.map(row => this.renderRow(row));
    if (rows.length === 0) {
      items.push(this.placeholder());
    }
    this.tree.replaceChildren(...items);
    if (focusedId) {
      this.tree.querySelector<HTMLElement>(`[data-uc-id="${CSS.escape(focusedId)}"]`)?.focus();
    }
  }

  private placeholder(): HTMLElement {
    const li = document.createElement('li');
    li.className = 'uc-CatalogTree-message';
    if (this.model.loading) {
      li.dataset.ucMessage = 'loading';
      li.textContent = 'Loading…';
    } else if (this.model.filter) {
      li.dataset.ucMessage = 'empty';
      li.textContent = 'No loaded name matches';
    } else if (this.model.roots !== null && this.model.error === null) {
      li.dataset.ucMessage = 'empty';
      li.textContent = 'No catalogs you may use';
    } else {
      li.hidden = true;
    }
    return li;
  }

  private renderRow(row: Row): HTMLElement {
    const li = document.createElement('li');
    li.style.paddingLeft = `${4 + row.depth * 14}px`;
    if (row.type === 'message') {
      li.className = `uc-CatalogTree-message uc-mod-${row.kind}`;
      li.dataset.ucMessage = row.kind;
      li.textContent = row.text;
      if (row.kind === 'error') {
        li.setAttribute('role', 'alert');
      }
      return li;
    }
    const node = row.node;
    li.className = ITEM_CLASS;
    li.setAttribute('role', 'treeitem');
    li.tabIndex = 0;
    li.dataset.ucId = node.id;
    li.dataset.ucKind = node.kind;
    li.dataset.ucName = copyText(node);
    li.dataset.ucReadable = String(node.readable);
    if (!node.readable) {
      li.classList.add('uc-mod-unreadable');
    }
    if (this.model.selected?.id === node.id) {
      li.classList.add('jp-mod-selected');
      li.setAttribute('aria-selected', 'true');
    }
    const expandable = isExpandable(node);
    if (expandable) {
      li.setAttribute('aria-expanded', String(row.expanded));
    }
    const caret = document.createElement('span');
    caret.className = 'uc-CatalogTree-caret';
    if (expandable) {
      (row.expanded ? caretDownIcon : caretRightIcon).element({
        container: caret,
        elementPosition: 'center',
        height: '16px',
        width: '16px'
      });
    }
    const icon = document.createElement('span');
    icon.className = 'uc-CatalogTree-icon';
    iconFor(node.kind).element({ container: icon, elementPosition: 'center', height: '16px', width: '16px' });
    const label = document.createElement('span');
    label.className = 'uc-CatalogTree-label';
    label.textContent = node.name;
    li.append(caret, icon, label);
    if (node.detail) {
      const detail = document.createElement('span');
      detail.className = 'uc-CatalogTree-detail';
      detail.textContent = node.detail;
      li.append(detail);
    }
    const tip = [copyText(node)];
    if (node.comment) {
      tip.push(node.comment);
    }
    if (!node.readable) {
      tip.push('You may not read this object.');
    }
    li.title = tip.join('\n');
    return li;
  }

  private onClick(event: MouseEvent): void {
    const node = this.nodeOf(event.target);
    if (!node) {
      return;
    }
    this.model.select(node);
    void this.model.toggle(node);
  }

  private onKey(event: KeyboardEvent): void {
    const node = this.nodeOf(event.target);
    if (!node) {
      return;
    }
    const items = [...this.tree.querySelectorAll<HTMLElement>(`.${ITEM_CLASS}`)];
    const index = items.findIndex(item => item.dataset.ucId === node.id);
    const focus = (i: number) => {
      const item = items[Math.max(0, Math.min(items.length - 1, i))];
      if (item) {
        item.focus();
        const target = this.model.find(item.dataset.ucId ?? '');
        this.model.select(target);
      }
    };
    switch (event.key) {
      case 'Enter':
      case ' ':
        this.model.select(node);
        void this.model.toggle(node);
        break;
      case 'ArrowRight':
        void this.model.expand(node);
        break;
      case 'ArrowLeft':
        this.model.collapse(node);
        break;
      case 'ArrowDown':
        focus(index + 1);
        break;
      case 'ArrowUp':
        focus(index - 1);
        break;
      default:
        return;
    }
    event.preventDefault();
  }
}
